#!/usr/bin/env python3
"""A headless Chromium for the desk's console tests: Debian's chromium and chromium-driver (scripts/setup.sh),
driven by selenium.

    from browser import start_chromium
    driver = start_chromium()
    try:
        driver.get(url)
    finally:
        driver.quit()

Run on its own, it checks itself: loads a page from a local http.server and a data: URL, and saves a screenshot.

    .deps/venv/bin/python Tests/desk/browser.py
"""

import http.server
import os
import subprocess
import sys
import tempfile
import threading

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def start_chromium(window=(1280, 900), log_path=None):
    """A new headless Chromium with a fresh profile: the caller quits it.

    The binary and the driver are named explicitly so that selenium never looks for (or downloads) a browser of
    its own. --no-sandbox because the tests run as root; --disable-dev-shm-usage because a container's /dev/shm
    is small; --ignore-certificate-errors for the test provider's HTTPS, whose CA the browser does not know."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--ignore-certificate-errors",
                     "--disable-gpu", "--no-first-run", "--disable-extensions",
                     f"--window-size={window[0]},{window[1]}"):
        options.add_argument(argument)
    service = Service(CHROMEDRIVER, log_output=log_path or os.devnull)
    return webdriver.Chrome(service=service, options=options)


def _self_check():
    failures = []

    def check(name, ok):
        print(f"{'ok  ' if ok else 'FAIL'} {name}", flush=True)
        failures.extend([] if ok else [name])

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<!doctype html><title>desk</title><h1 id='hello'>Hello from the console</h1>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    driver = start_chromium()
    try:
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/desk/")
        check("a page from a local server loads", driver.find_element(By.ID, "hello").text == "Hello from the console")
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "page.png")
            saved = driver.save_screenshot(path)
            with open(path, "rb") as file:
                check("the screenshot is a PNG", saved and file.read(8) == b"\x89PNG\r\n\x1a\n")
        driver.get("data:text/html,<p id='x'>data URL</p>")
        check("a data: URL loads", driver.find_element(By.ID, "x").text == "data URL")
        package = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "chromium"], capture_output=True, text=True)
        check("the browser is Debian's chromium", package.stdout.startswith(driver.capabilities["browserVersion"]))
    finally:
        driver.quit()
        server.shutdown()
    print(f"{4 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(_self_check())
