#!/usr/bin/env python3
"""What Chromium does with the desk's session cookie when the desk is served over plain HTTP on loopback, as the
end-to-end tests serve it. It answers the questions the console's cookie design rests on:

  - is `__Host-desk-session=...; Secure; HttpOnly; SameSite=Strict; Path=/`, set by http://HOST:PORT (not
    https), stored at all?
  - set on /desk/callback, reached by a redirect chain that started cross-site (the provider's https page posts
    its sign-in form, 302 to the callback, which sets the cookie and 303s to /desk/), is it sent on the
    navigation to /desk/, and on a same-origin fetch() (GET and POST) made by /desk/'s script?
  - does a second cross-site sign-in carry the existing cookie to /desk/callback?
  - does it matter whether the desk is 127.0.0.1 or localhost (and the provider the one or the other)?

    .deps/venv/bin/python Tests/desk/cookie_experiment.py [--cookie 'ATTRIBUTES']

A "provider" (HTTPS, a test CA's certificate) and a "desk" (HTTP) run on loopback; a fresh headless Chromium
walks the flow once per pair of host names and prints what each request carried. A control runs the desk on this
machine's non-loopback address.

Seen with Debian's Chromium 156, the same for 127.0.0.1 and localhost on either side:
  - the cookie is stored, Secure, HttpOnly, Strict, __Host- prefix and all: loopback over http counts as a
    secure origin. On the non-loopback address (the control) it is not stored at all.
  - it is never sent on the navigations of the cross-site chain: not to /desk/callback (so a second sign-in's
    callback does not see the old session) and, when the callback 303s, not to /desk/ either, nor to a reload of
    that /desk/ (the reload keeps the chain's cross-site initiator; a typed URL sends it).
  - it is sent on /desk/'s same-origin fetch() GET and POST; the POST carries Origin http://HOST:PORT, the GET none.
  - when the callback answers 200 with a page whose script goes to /desk/, that navigation is same-origin and
    carries the cookie (and so does a reload).
  - document.cookie stays empty (HttpOnly).
"""

import argparse
import http.server
import json
import os
import socket
import ssl
import sys
import tempfile
import threading
import urllib.parse

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

sys.dont_write_bytecode = True  # its helpers beside it leave no __pycache__ in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import start_chromium  # noqa: E402
from test_ca import server_certificate  # noqa: E402

COOKIE = "__Host-desk-session=sealed-v1; Secure; HttpOnly; SameSite=Strict; Path=/"
DESK_PAGE = b"""<!doctype html><title>desk</title><pre id="result"></pre><script>
(async () => {
  const get = await (await fetch('/desk/api/session')).json();
  const post = await (await fetch('/desk/api/echo', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                                     body: '{}'})).json();
  document.getElementById('result').textContent = JSON.stringify({get, post, document_cookie: document.cookie});
})();
</script>"""
LANDING_PAGE = b"""<!doctype html><title>signed in</title><script>location.replace('/desk/')</script>"""


def serve(handler, host="127.0.0.1", tls=None):
    server = http.server.ThreadingHTTPServer((host, 0), handler)
    if tls:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def non_loopback_address():
    """This machine's address on its default route (no packet is sent), for the control case: not loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            return probe.getsockname()[0]
        except OSError:
            return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cookie", default=COOKIE, help="the Set-Cookie value of /desk/callback")
    cookie = parser.parse_args().cookie
    seen = []  # (method and path, Cookie, Origin, Sec-Fetch-Site) of every desk request

    class Desk(http.server.BaseHTTPRequestHandler):
        def answer(self, status, body=b"", headers=()):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path = self.path.split("?")[0]
            seen.append((f"{self.command} {path}", self.headers.get("Cookie"), self.headers.get("Origin"),
                         self.headers.get("Sec-Fetch-Site")))
            if path == "/desk/callback" and "landing=page" in self.path:  # lands with a page of its own
                self.answer(200, LANDING_PAGE, [("Set-Cookie", cookie), ("Content-Type", "text/html")])
            elif path == "/desk/callback":
                self.answer(303, headers=[("Set-Cookie", cookie), ("Location", "/desk/")])
            elif path == "/desk/":
                self.answer(200, DESK_PAGE, [("Content-Type", "text/html")])
            else:
                self.answer(200, b"{}", [("Content-Type", "application/json")])

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.do_GET()

        def log_message(self, *args):
            pass

    class Provider(Desk):
        def do_GET(self):  # the sign-in page: a form posted to itself, as the test provider's
            to = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("to", [""])[0]
            self.answer(200, f"""<form method="post" action="/login"><input type="hidden" name="to" value="{to}">
                <button id="sign-in">Sign in</button></form>""".encode(), [("Content-Type", "text/html")])

        def do_POST(self):
            form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            self.answer(302, headers=[("Location", form["to"][0])])

    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="cookie-experiment-") as directory:
        _, cert, key = server_certificate(directory)
        tls.load_cert_chain(cert, key)
    provider, desk = serve(Provider, tls=tls), serve(Desk)
    control = non_loopback_address()
    scenarios = [(p, d, landing) for d in ("127.0.0.1", "localhost") for p in ("127.0.0.1", "localhost")
                 for landing in ("303", "page")]
    if control:
        scenarios.append(("127.0.0.1", control, "303"))
        desks = {control: serve(Desk, host=control)}
    print(f"Set-Cookie: {cookie}")

    def sent(path):
        return next(("yes" if c else "no") + (f", Origin {o}" if o else "") + f", Sec-Fetch-Site {f}"
                    for p, c, o, f in seen if p == path)

    for provider_host, desk_host, landing in scenarios:
        port = desks[desk_host].server_address[1] if desk_host == control else desk.server_address[1]
        desk_url = f"http://{desk_host}:{port}"
        login = (f"https://{provider_host}:{provider.server_address[1]}/login?"
                 + urllib.parse.urlencode({"to": f"{desk_url}/desk/callback?code=c&state=s&landing={landing}"}))
        print(f"\n== provider https://{provider_host}, desk http://{desk_host}, callback answers "
              + ("303 to /desk/" if landing == "303" else "200, its script goes to /desk/"))
        driver = start_chromium()

        def wait_for_page():
            WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "result").text)
            return json.loads(driver.find_element(By.ID, "result").text)

        try:
            for attempt in ("first sign-in", "second sign-in"):
                seen.clear()
                driver.get(login)
                driver.find_element(By.ID, "sign-in").click()
                page = wait_for_page()
                print(f"  {attempt}: cookie sent with")
                for path in ("GET /desk/callback", "GET /desk/", "GET /desk/api/session", "POST /desk/api/echo"):
                    print(f"    {path:22} {sent(path)}")
                print(f"    document.cookie {page['document_cookie']!r}")
            stored = [(c["name"], c.get("secure"), c.get("httpOnly"), c.get("sameSite")) for c in driver.get_cookies()]
            print(f"  stored (name, secure, httpOnly, sameSite): {stored}")
            seen.clear()
            driver.refresh()
            wait_for_page()
            print(f"  reload of /desk/:   {sent('GET /desk/')}")
            seen.clear()
            driver.get(desk_url + "/desk/")
            wait_for_page()
            print(f"  typed /desk/:       {sent('GET /desk/')}")
        finally:
            driver.quit()
    provider.shutdown()
    desk.shutdown()


if __name__ == "__main__":
    main()
