#!/usr/bin/env python3
"""The support desk end to end, with real parts: `receipt-worker desk` (and `receipt-worker run` for a job's grant)
against the test OpenID Connect provider (oidc_provider.py), the App Store simulator over HTTP, a real Kafka broker
and the ledger, SQLite and, when POSTGRES_URL is set, PostgreSQL (the same tests again, on a schema of their own);
the console in a headless Chromium (browser.py). Each test asserts what an agent, a lead or an attacker would notice:
the page, the status, the ledger's answer, the audit, the results topic, the metrics.

    scripts/test-desk.sh [SQLiteLedger[.test_...]]   (starts Kafka and PostgreSQL, runs this; the way to run it)
    KAFKA_BOOTSTRAP=127.0.0.1:9092 TANSU_BIN=.deps/tools/tansu [POSTGRES_URL=postgresql://...] \\
        .deps/venv/bin/python Tests/desk/test_desk.py [SQLiteLedger[.test_...]]
    (or PYTHONDONTWRITEBYTECODE=1 .deps/venv/bin/python -m unittest Tests/desk/test_desk.py: then the run's files
    are kept whatever the outcome)

Environment:
    KAFKA_BOOTSTRAP    a broker (required); TANSU_BIN creates the topics on it (Tansu's CLI)
    POSTGRES_URL       PostgreSQL: the PostgreSQL run is skipped without it
    DESK_BIN           where receipt-worker and appstore-sim are (default .build/debug)
    DESK_SCREENSHOT    where the console's screenshot goes (default: console.png in the run's temp dir); the
                       PostgreSQL run's is beside it with "-postgres" before the extension. Its path is printed.
    DESK_KEEP          set: keep the run's temp dir (configuration, logs) even when the tests pass
"""

import atexit
import concurrent.futures
import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # browser.py and test_ca.py leave no __pycache__ in the work tree
sys.path.insert(0, HERE)
from browser import start_chromium  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
from free_port import free_port  # noqa: E402

BIN = os.path.abspath(os.environ.get("DESK_BIN", os.path.join(ROOT, ".build", "debug")))
PYTHON = sys.executable
APPLE_KEY = os.path.join(ROOT, "Tests", "AppleClientTests", "testSigningKey.p8")
BUNDLE_ID = "com.example"  # the simulator's app
PRODUCT = "com.example.gems100"
RUN_DIR = tempfile.mkdtemp(prefix="desk-tests-")
PLAYER_CAP = 1


def log(message):
    print(f"[desk-tests] {message}", file=sys.stderr, flush=True)


def wait_until(condition, timeout=15.0, what="the condition", interval=0.05):
    """condition's first truthy value, polled until timeout seconds have passed (then AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(interval)




def _die_with_parent():
    """In the child before exec: SIGTERM when this test process dies, however it dies (no process left behind)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Process:
    """A child process with its output in a log file; stopped with SIGTERM (SIGKILL after `patience` s)."""

    def __init__(self, name, arguments, directory, stdout=None):
        self.name = name
        self.log_path = os.path.join(directory, f"{name}.log")
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen(arguments, stdout=stdout or self.log, stderr=self.log,
                                        stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent, cwd=ROOT)
        self.exit_status = None
        self.killed = False

    def stop(self, patience=15.0):
        """The exit status after SIGTERM; kills it (and says so) when it does not stop within patience seconds."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(patience)
            except subprocess.TimeoutExpired:
                self.killed = True
                log(f"{self.name} did not stop within {patience} s of SIGTERM: killed (log {self.log_path})")
                self.process.kill()
                self.process.wait()
        self.log.close()
        self.exit_status = self.process.returncode
        return self.exit_status

    def tail(self, lines=30):
        try:
            with open(self.log_path, "rb") as file:
                return b"".join(file.readlines()[-lines:]).decode(errors="replace")
        except OSError:
            return ""


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body or b"null")

    def cookies(self):
        """Set-Cookie's name=value pairs."""
        found = {}
        for header in self.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            found[name.strip()] = rest.split(";")[0]
        return found

    def __repr__(self):
        return f"HTTP {self.status} {self.body[:300]!r}"


def http(method, url, body=None, headers=None, context=None, timeout=20):
    """One request, redirects not followed: a Response whatever its status. body: bytes, str or a JSON object."""
    headers = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    elif isinstance(body, str):
        body = body.encode()
    handlers = [NoRedirect()] + ([urllib.request.HTTPSHandler(context=context)] if context else [])
    opener = urllib.request.build_opener(*handlers)
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with opener.open(request, timeout=timeout) as answer:
            return Response(answer.status, answer.headers, answer.read())
    except urllib.error.HTTPError as error:
        return Response(error.code, error.headers, error.read())


class Stack:
    """The parts of one run: provider, simulator, topics of its own, the ledger, the desk and a follower of the
    results topic. `ledger` is "sqlite" or "postgres"."""

    def __init__(self, ledger):
        self.ledger = ledger
        self.directory = tempfile.mkdtemp(prefix=f"{ledger}-", dir=RUN_DIR)
        self.processes = []
        self.suffix = secrets.token_hex(4)

    # --- starting and stopping ----------------------------------------------------------------------------------
    def start(self):
        started = time.monotonic()
        self.desk_port, self.metrics_port = free_port(), free_port()
        self.desk = f"http://127.0.0.1:{self.desk_port}"
        oidc_dir = os.path.join(self.directory, "oidc")
        port_file = os.path.join(self.directory, "provider.port")
        self.provider_process = self.spawn("provider", [PYTHON, os.path.join(HERE, "oidc_provider.py"), port_file,
                                                        oidc_dir, "--redirect-uri", f"{self.desk}/desk/callback"])
        sim_out = os.path.join(self.directory, "appstore-sim.out")
        with open(sim_out, "wb") as out:
            self.spawn("appstore-sim", [os.path.join(BIN, "appstore-sim"), "--port", "0"], stdout=out)
        with open(os.path.join(self.directory, "root.pem"), "wb") as out:
            subprocess.run([os.path.join(BIN, "appstore-sim"), "--print-test-root"], stdout=out, check=True)
        self.create_topics()
        self.sim = wait_until(lambda: self._listening(sim_out), 15, "the simulator listens")
        self.provider_port = int(wait_until(lambda: self._read(port_file), 20, "the provider writes its port"))
        self.issuer = f"https://127.0.0.1:{self.provider_port}"
        self.tls = ssl.create_default_context(cafile=os.path.join(oidc_dir, "ca.pem"))
        self.write_configuration(oidc_dir)
        if self.ledger == "postgres":
            self.tool("ledger", "migrate")
        self.results_path = os.path.join(self.directory, "results.jsonl")
        with open(self.results_path, "wb") as out:
            self.spawn("results", [self.receipt_worker, "results", "--config", self.config, "--from-beginning",
                                   "--json"], stdout=out)
        self.grant_a_job()
        self.start_desk()
        log(f"{self.ledger}: desk {self.desk}, provider {self.issuer}, simulator {self.sim}, "
            f"ready in {time.monotonic() - started:.1f} s; files in {self.directory}")

    def start_desk(self):
        name = "desk" if not any(p.name.startswith("desk") for p in self.processes) else f"desk-{time.time():.0f}"
        self.desk_process = self.spawn(name, [self.receipt_worker, "desk", "--config", self.config])
        wait_until(self.ready, 30, "the desk is ready (/readyz)")

    def stop(self):
        for process in reversed(self.processes):
            process.stop()

    def sign_in_answers(self):
        """GET /desk/login answers with the redirect to the provider within 5 s. When it does not, the desk (stuck on
        it) is killed and started again for the other tests, and the calling test fails as blocked."""
        try:
            answer = http("GET", f"{self.desk}/desk/login", timeout=5)
        except OSError as error:
            stuck = self.desk_process
            stuck.stop(patience=1)
            self.processes.remove(stuck)
            self.start_desk()
            raise AssertionError(f"BLOCKED: the desk's GET /desk/login did not answer within 5 s ({error!r}); the "
                                 f"desk was killed and started again (its log: {stuck.log_path})") from None
        assert answer.status == 302 and answer.headers["Location"].startswith(self.issuer), answer
        return answer

    def spawn(self, name, arguments, stdout=None):
        process = Process(name, arguments, self.directory, stdout=stdout)
        self.processes.append(process)
        return process

    @property
    def receipt_worker(self):
        return os.path.join(BIN, "receipt-worker")

    @staticmethod
    def _read(path):
        try:
            with open(path, encoding="utf-8") as file:
                return file.read().strip()
        except FileNotFoundError:
            return None

    def _listening(self, path):
        found = re.search(r"listening on (\S+)", self._read(path) or "")
        return found and found.group(1)

    def create_topics(self):
        self.topics = {name: f"desk-{name}-{self.suffix}"
                       for name in ("jobs", "results", "retries", "dlq", "notifications", "consumption")}
        for topic in self.topics.values():
            subprocess.run([os.environ["TANSU_BIN"], "topic", "create", topic, "--partitions", "1", "--broker",
                            f"tcp://{os.environ['KAFKA_BOOTSTRAP']}"], check=True, capture_output=True)

    def write_configuration(self, oidc_dir):
        session_key = os.path.join(self.directory, "session_key")
        with open(session_key, "w", encoding="utf-8") as out:
            out.write(secrets.token_hex(32))
        erasure_key = os.path.join(self.directory, "erasure_key")
        with open(erasure_key, "w", encoding="utf-8") as out:
            out.write(secrets.token_hex(32))
        if self.ledger == "postgres":
            ledger = [f"ledger.url={os.environ['POSTGRES_URL']}", f"ledger.schema=desk_{self.suffix}"]
        else:
            ledger = [f"ledger.url=sqlite:{os.path.join(self.directory, 'ledger.sqlite')}"]
        lines = [
            f"apple.bundle_id={BUNDLE_ID}",
            "apple.app_apple_id=1234567890",
            f"apple.verify_receipt.production_url={self.sim}/production/verifyReceipt",
            f"apple.verify_receipt.sandbox_url={self.sim}/sandbox/verifyReceipt",
            f"apple.api.production_url={self.sim}/production",
            f"apple.api.sandbox_url={self.sim}/sandbox",
            "apple.api.key_id=keyId",
            "apple.api.issuer_id=issuerId",
            f"apple.api.private_key_file={APPLE_KEY}",
            "apple.allow_insecure_urls=true",
            f"apple.root_certificates={os.path.join(self.directory, 'root.pem')}",
            *ledger,
            f"kafka.bootstrap.servers={os.environ['KAFKA_BOOTSTRAP']}",
            f"kafka.group.id=desk-tests-{self.suffix}",
            # Tansu waits for the rebalance timeout on a first join: short ones (docs of the environment).
            "kafka.session.timeout.ms=6000",
            "kafka.heartbeat.interval.ms=1000",
            "kafka.max.poll.interval.ms=10000",
            *(f"topics.{name}={topic}" for name, topic in self.topics.items()),
            f"desk.listen=127.0.0.1:{self.desk_port}",
            f"desk.public_url={self.desk}",
            f"desk.oidc.issuer={self.issuer}",
            "desk.oidc.client_id=support-desk",
            f"desk.oidc.client_secret_file={os.path.join(oidc_dir, 'client_secret')}",
            f"desk.oidc.ca_file={os.path.join(oidc_dir, 'ca.pem')}",
            f"desk.session_key_file={session_key}",
            f"privacy.erasure_key_file={erasure_key}",
            f"desk.caps.player_daily={PLAYER_CAP}",
            f"metrics.listen=127.0.0.1:{self.metrics_port}",
        ]
        self.config = os.path.join(self.directory, "desk.properties")
        with open(self.config, "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")

    def tool(self, *arguments, check=True):
        """receipt-worker ARGUMENTS --config (the desk's): its standard output."""
        done = subprocess.run([self.receipt_worker, *arguments, "--config", self.config], capture_output=True,
                              text=True, timeout=60, cwd=ROOT)
        if check and done.returncode != 0:
            raise AssertionError(f"receipt-worker {' '.join(arguments)}: exit {done.returncode}\n{done.stderr}")
        return done.stdout

    def ready(self):
        try:
            return http("GET", f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=2).status == 200
        except OSError:
            return False

    def grant_a_job(self):
        """A purchase granted to a player by a job, as the game's backend submits it: the worker runs, the job's
        grant reaches the results topic, the worker stops. The console's first lookup finds it."""
        self.job_purchase = self.purchase(customer=f"browser-customer-{self.suffix}")
        self.job_player, self.job_order = f"player-browser-{self.suffix}", f"order-job-{self.suffix}"
        worker = self.spawn("worker", [self.receipt_worker, "run", "--config", self.config,
                                       "--set", f"metrics.listen=127.0.0.1:{free_port()}"])
        self.tool("enqueue", "--order-id", self.job_order, "--user-id", self.job_player, "--product-id", PRODUCT,
                  "--signed-transaction", self.job_purchase["signed_transaction"])
        event = wait_until(lambda: self.event(order_id=self.job_order), 60, "the job's grant on the results topic")
        assert event.get("decision") == "grant", event
        status = worker.stop()
        assert status == 0, f"the worker exited {status}:\n{worker.tail()}"

    # --- the simulator, the provider, the desk ------------------------------------------------------------------
    def purchase(self, customer, **fields):
        """A purchase at the (simulated) App Store: {transaction_id, order_id (the invoice's), ...}."""
        answer = http("POST", f"{self.sim}/admin/purchases", {"product_id": PRODUCT, "customer": customer, **fields})
        assert answer.status == 201, answer
        return answer.json()

    def mint(self, **claims):
        """A token from the provider's test endpoint (default: a valid access token for ana)."""
        answer = http("POST", f"{self.issuer}/test/mint", claims, context=self.tls)
        assert answer.status == 200, answer
        return answer.json()["token"]

    def token(self, subject, role):
        """A valid token for a person of the test's own (so that caps and audit lines are theirs alone)."""
        return self.mint(sub=subject, groups=[f"support-{role}"], email=f"{subject}@studio.test", name=subject)

    def api(self, method, path, body=None, token=None, headers=None):
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return http(method, self.desk + path, body, headers)

    def audit(self, **query):
        """The audit as a lead reads it (GET /desk/api/audit), newest first; without the lines of the tests' own
        checks (lookup_player's "checker")."""
        answer = self.api("GET", "/desk/api/audit?" + urllib.parse.urlencode({"limit": 1000, **query}),
                          token=self.lead_token())
        assert answer.status == 200, answer
        return [line for line in answer.json()["lines"] if line["agent"] != "checker"]

    def lead_token(self):
        return self.mint(sub="lou")

    def lookup_player(self, player):
        """The ledger's grants to player, as a viewer sees them: {transaction_id: verdict}."""
        answer = self.api("POST", "/desk/api/lookup", {"ticket": "CHECK-1", "user_id": player},
                          token=self.token("checker", "viewer"))
        assert answer.status == 200, answer
        return {p["transaction_id"]: p["verdict"] for p in answer.json()["purchases"]}

    def events(self):
        """Every event the results topic holds so far (the follower's JSON lines)."""
        events = []
        with open(self.results_path, "rb") as file:
            for line in file.read().splitlines():
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass  # a line half written
        return events

    def event(self, **fields):
        return next((e for e in self.events() if all(e.get(k) == v for k, v in fields.items())), None)

    def settle_topic(self):
        """After this returns, every event published before it is in events(): a credit's event published now is
        awaited, and the results topic has one partition, so everything before it arrived too."""
        purchase = self.purchase(customer=f"sentinel-{secrets.token_hex(4)}")
        order = f"order-sentinel-{secrets.token_hex(4)}"
        answer = self.api("POST", "/desk/api/credit", {
            "ticket": "SENTINEL-1", "transaction_id": purchase["transaction_id"], "order_id": order,
            "user_id": f"player-sentinel-{secrets.token_hex(4)}", "reason": "the tests' sentinel",
            "apple_order_id": purchase["order_id"]}, token=self.token(f"sentinel-{secrets.token_hex(3)}", "agent"))
        assert answer.status == 200, answer
        wait_until(lambda: self.event(order_id=order), 30, "the sentinel credit's event")

    def metrics(self):
        """{(name, frozenset(labels)): value} of /metrics."""
        text = http("GET", f"http://127.0.0.1:{self.metrics_port}/metrics").body.decode()
        values = {}
        for line in text.splitlines():
            found = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$", line)
            if found and not line.startswith("#"):
                labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', found.group(2) or ""))
                values[(found.group(1), labels)] = float(found.group(3))
        return values

    def metric(self, name, **labels):
        return self.metrics().get((name, frozenset(labels.items())), 0.0)

    # --- the console's sign-in without a browser (for the cookie's own attacks) -------------------------------
    def session_cookie(self, user):
        """The console's sign-in walked by hand: /desk/login, the provider's form, /desk/callback. The session
        cookie's value, and what a replay of the callback would send: {"session", "callback", "signin"}."""
        start = self.sign_in_answers()
        signin_cookie = start.cookies()["__Host-desk-signin"]
        authorize = urllib.parse.urlsplit(start.headers["Location"])
        form = dict(urllib.parse.parse_qsl(authorize.query), username=user)
        back = http("POST", f"{self.issuer}/authorize", urllib.parse.urlencode(form),
                    {"Content-Type": "application/x-www-form-urlencoded"}, context=self.tls)
        assert back.status == 302, back
        callback = urllib.parse.urlsplit(back.headers["Location"])
        landed = http("GET", f"{self.desk}{callback.path}?{callback.query}",
                      headers={"Cookie": f"__Host-desk-signin={signin_cookie}"})
        assert landed.status == 303, landed
        return {"session": landed.cookies()["__Host-desk-session"], "signin": signin_cookie,
                "callback": f"{self.desk}{callback.path}?{callback.query}"}


class Browser:
    """A headless Chromium signed in at the console as `user` through the provider's form."""

    def __init__(self, stack, user):
        self.stack = stack
        stack.sign_in_answers()
        self.driver = start_chromium(log_path=os.path.join(stack.directory, f"chromedriver-{user}.log"))
        self.driver.set_page_load_timeout(20)
        self.driver.set_script_timeout(20)
        try:
            self.sign_in(user)
        except BaseException:
            self.quit()
            raise

    def quit(self):
        self.driver.quit()

    def wait(self, condition, timeout=15, what="the page"):
        # An element the console re-rendered while the condition read it is stale: not yet, asked again.
        return WebDriverWait(self.driver, timeout, poll_frequency=0.05,
                             ignored_exceptions=[StaleElementReferenceException]).until(
            lambda driver: condition(), message=what)

    def element(self, id):
        return self.driver.find_element(By.ID, id)

    def sign_in(self, user):
        self.driver.get(f"{self.stack.desk}/desk/")
        self.wait(lambda: self.element("sign-in").is_displayed(), what="the console offers to sign in")
        self.element("sign-in").click()
        self.wait(lambda: self.driver.find_elements(By.ID, "username"), what="the provider's sign-in form")
        assert self.driver.current_url.startswith(self.stack.issuer + "/authorize"), self.driver.current_url
        self.element("username").send_keys(user)
        self.element("sign-in").click()
        self.wait(lambda: self.driver.current_url == f"{self.stack.desk}/desk/"
                  and self.element("desk").is_displayed(), what=f"{user} lands on the console")

    def text(self, id):
        return self.element(id).text

    def rows(self, table):
        """The table's body as lists of cell texts, read in one script: the console re-renders a table as it
        refreshes it, and cells read one request at a time could be gone by the next (stale)."""
        texts = self.driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0]),"
            " row => Array.from(row.querySelectorAll('td'), cell => cell.innerText));", f"#{table} tbody tr")
        return [[text.strip() for text in row] for row in texts]

    def look_up(self, kind, value):
        Select(self.element("lookup-kind")).select_by_value(kind)
        field = self.element("lookup-value")
        field.clear()
        field.send_keys(value)
        self.driver.execute_script("document.getElementById('lookup-summary').textContent = ''")
        self.element("lookup-submit").click()
        self.wait(lambda: self.text("lookup-summary"), what=f"the lookup by {kind} answers")
        return self.rows("purchases")

    def fetch(self, method, path, body):
        """fetch() from the console's page, as its script calls the API (the session's cookie, its CSRF token,
        the page's origin): {status, answer}."""
        return self.driver.execute_async_script("""
            const [method, path, body, done] = arguments;
            (async () => {
              const session = await (await fetch('/desk/api/session')).json();
              const response = await fetch(path, {method, body: JSON.stringify(body), credentials: 'same-origin',
                headers: {'Content-Type': 'application/json', 'X-CSRF-Token': session.csrf_token}});
              done({status: response.status, answer: await response.json()});
            })().catch((error) => done({status: 0, answer: String(error)}));
        """, method, path, body)


def screenshot_path(ledger):
    path = os.environ.get("DESK_SCREENSHOT") or os.path.join(RUN_DIR, "console.png")
    if ledger != "sqlite":
        stem, extension = os.path.splitext(path)
        path = f"{stem}-{ledger}{extension or '.png'}"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return path


class DeskTests:
    """The tests, run once per ledger (the subclasses below say which)."""

    LEDGER = None
    stack = None

    @classmethod
    def setUpClass(cls):
        for name in ("KAFKA_BOOTSTRAP", "TANSU_BIN"):
            if not os.environ.get(name):
                raise unittest.SkipTest(f"{name} is not set: run scripts/test-desk.sh")
        cls.stack = Stack(cls.LEDGER)
        try:
            cls.stack.start()
        except BaseException:
            cls.stack.stop()
            for process in cls.stack.processes:
                log(f"--- {process.name} ({process.log_path}):\n{process.tail()}")
            raise

    @classmethod
    def tearDownClass(cls):
        stack = cls.stack
        stack.stop()
        desk = stack.desk_process
        # The desk stops on SIGTERM within its grace: a process that must be killed would be killed mid-credit
        # by Kubernetes too.
        if desk.killed or desk.exit_status != 0:
            raise AssertionError(f"the desk did not stop cleanly on SIGTERM (exit {desk.exit_status}, killed "
                                 f"{desk.killed}):\n{desk.tail()}")

    def setUp(self):
        self.id_ = secrets.token_hex(3)  # this test's players, orders, agents and tickets carry it

    def credit_body(self, purchase, player, order, ticket, **extra):
        return {"ticket": ticket, "transaction_id": purchase["transaction_id"], "order_id": order,
                "user_id": player, "reason": "the player says it never arrived",
                "apple_order_id": purchase["order_id"], **extra}

    # --- the console -----------------------------------------------------------------------------------------
    def test_agent_finds_a_players_purchases_and_credits_one_in_the_console(self):
        stack = self.stack
        job = stack.job_purchase
        lost = stack.purchase(customer=f"browser-customer-{stack.suffix}")  # the same customer: in the history
        player, ticket, order = stack.job_player, f"HD-{self.id_}", f"order-console-{self.id_}"
        browser = Browser(stack, "ana")
        try:
            self.assertIn("ana@studio.test", browser.text("agent"))
            self.assertTrue(browser.element("credit-form").is_displayed(), "an agent sees the credit form")
            self.assertFalse(browser.element("lead").is_displayed(), "an agent sees no approvals")
            browser.element("ticket").send_keys(ticket)

            rows = browser.look_up("user_id", player)
            self.assertEqual([row[0] for row in rows], [job["transaction_id"]], rows)
            self.assertIn(f"granted to order {stack.job_order} of player {player}", rows[0][4])

            rows = browser.look_up("history", job["transaction_id"])
            cases = {row[0]: row[4] for row in rows}
            self.assertEqual(set(cases), {job["transaction_id"], lost["transaction_id"]}, rows)
            self.assertIn("never claimed", cases[lost["transaction_id"]])
            self.assertIn("granted to order", cases[job["transaction_id"]])

            lost_row = next(row for row in browser.driver.find_elements(By.CSS_SELECTOR, "#purchases tbody tr")
                            if row.find_element(By.TAG_NAME, "td").text == lost["transaction_id"])
            lost_row.find_element(By.CSS_SELECTOR, "button.credit").click()
            self.assertEqual(browser.element("credit-transaction").get_attribute("value"), lost["transaction_id"])
            for field, value in (("credit-order", order), ("credit-user", player),
                                 ("credit-apple-order", lost["order_id"]),
                                 ("credit-reason", "gems never arrived after the purchase")):
                browser.element(field).send_keys(value)
            browser.element("credit-submit").click()
            outcome = browser.wait(lambda: browser.text("credit-outcome"), what="the credit's outcome")
            self.assertTrue(outcome.startswith("credited"), outcome)
            self.assertIn(f"credited to order {order} of player {player}", browser.text("credit-outcome"))
            # Audit columns: when, who (name and subject), role, action, outcome, ticket, player.
            browser.wait(lambda: ["credit", "credited", ticket, player] in [r[3:7] for r in browser.rows("audit")],
                         what="the credit's line in the console's audit table")
            audit_row = next(r for r in browser.rows("audit") if r[3:7] == ["credit", "credited", ticket, player])
            self.assertTrue(audit_row[1].startswith("ana@studio.test ("), audit_row)
            self.assertEqual(audit_row[2], "agent")

            rows = browser.look_up("user_id", player)
            cases = {row[0]: row[4] for row in rows}
            self.assertEqual(set(cases), {job["transaction_id"], lost["transaction_id"]}, rows)
            self.assertIn(f"granted to order {order} of player {player}", cases[lost["transaction_id"]])
        finally:  # the console as the agent left it, also when an assertion failed (what did the page say?)
            path = screenshot_path(stack.ledger)
            saved = browser.driver.save_screenshot(path)
            print(f"\nthe console's screenshot ({stack.ledger}): {path}", flush=True)
            browser.quit()
        self.assertTrue(saved, "the screenshot is saved")
        event = wait_until(lambda: stack.event(order_id=order), 30, "the credit's event on the results topic")
        self.assertEqual((event["decision"], event["user_id"], event["transaction_id"], event["credited_by"]),
                         ("grant", player, lost["transaction_id"], "ana@studio.test"))
        self.assertIn(ticket, event["credit_reason"])
        lines = [(l["action"], l["outcome"], l["player"]) for l in stack.audit(agent="ana") if l["ticket"] == ticket]
        self.assertEqual(lines, [("lookup", "answered", player), ("credit", "credited", player),
                                 ("history", "answered", None), ("lookup", "answered", player)])

    def test_viewer_is_refused_a_credit_audited_and_nothing_credited(self):
        stack = self.stack
        purchase = stack.purchase(customer=f"viewer-customer-{self.id_}")
        player, ticket, order = f"player-viewer-{self.id_}", f"HD-{self.id_}", f"order-viewer-{self.id_}"
        browser = Browser(stack, "vic")
        try:
            self.assertIn("vic@studio.test", browser.text("agent"))
            self.assertFalse(browser.element("credit-form").is_displayed(), "a viewer is shown no credit form")
            answer = browser.fetch("POST", "/desk/api/credit", self.credit_body(purchase, player, order, ticket))
            self.assertEqual(answer["status"], 403, answer)
            self.assertEqual(answer["answer"]["outcome"], "refused")
            browser.driver.refresh()  # the console's own table ("Your recent actions") shows the refusal
            browser.wait(lambda: ["credit", "refused", ticket, player] in [r[3:7] for r in browser.rows("audit")],
                         what="the refusal in the viewer's audit table")
        finally:
            browser.quit()
        # And with the viewer's bearer token, as a helpdesk's sidebar would call it.
        answer = stack.api("POST", "/desk/api/credit", self.credit_body(purchase, player, order, f"{ticket}-2"),
                           token=stack.mint(sub="vic"))
        self.assertEqual(answer.status, 403, answer)
        lines = stack.audit(player=player)
        self.assertEqual([(l["agent"], l["role"], l["action"], l["outcome"], l["ticket"]) for l in lines],
                         [("vic", "viewer", "credit", "refused", f"{ticket}-2"),
                          ("vic", "viewer", "credit", "refused", ticket)])
        self.assertEqual(stack.lookup_player(player), {})
        stack.settle_topic()
        self.assertIsNone(stack.event(order_id=order))

    def test_credit_over_the_players_cap_is_held_until_a_lead_approves_it_in_the_console(self):
        stack = self.stack
        first, second = (stack.purchase(customer=f"cap-customer-{self.id_}") for _ in range(2))
        player, ticket = f"player-cap-{self.id_}", f"HD-{self.id_}"
        agent = stack.token(f"agent-cap-{self.id_}", "agent")
        held_before = stack.metric("receipt_worker_desk_credits_total", outcome="held", role="agent")
        approved_before = stack.metric("receipt_worker_desk_credits_total", outcome="approved_credited", role="lead")

        answer = stack.api("POST", "/desk/api/credit",
                           self.credit_body(first, player, f"order-cap1-{self.id_}", ticket), token=agent)
        self.assertEqual((answer.status, answer.json()["outcome"]), (200, "credited"), answer)
        answer = stack.api("POST", "/desk/api/credit",
                           self.credit_body(second, player, f"order-cap2-{self.id_}", ticket), token=agent)
        self.assertEqual((answer.status, answer.json()["outcome"]), (202, "held"), answer)
        approval = answer.json()["approval_id"]
        self.assertEqual(stack.metric("receipt_worker_desk_credits_total", outcome="held", role="agent"),
                         held_before + 1)
        # Held: nothing recorded, nothing published.
        self.assertEqual(set(stack.lookup_player(player)), {first["transaction_id"]})
        stack.settle_topic()
        self.assertIsNone(stack.event(order_id=f"order-cap2-{self.id_}"))
        # Its requester cannot approve it (an agent, and their own).
        answer = stack.api("POST", f"/desk/api/approvals/{approval}/approve", {"ticket": ticket}, token=agent)
        self.assertEqual(answer.status, 403, answer)

        browser = Browser(stack, "lee")
        try:
            self.assertTrue(browser.element("lead").is_displayed(), "a lead sees the credits held")
            browser.element("ticket").send_keys(ticket)
            button = f"#approvals button.approve[data-id='{approval}']"
            browser.wait(lambda: browser.driver.find_elements(By.CSS_SELECTOR, button), what="the held credit")
            row = [r for r in browser.rows("approvals") if r[0] == str(approval)][0]
            self.assertEqual(row[1:5], [f"agent-cap-{self.id_}@studio.test", player, second["transaction_id"],
                                        "pending"])
            browser.driver.find_element(By.CSS_SELECTOR, button).click()
            outcome = browser.wait(lambda: browser.text("approval-outcome"), what="the approval's outcome")
            self.assertTrue(outcome.startswith("credited"), outcome)
            # Decided, it leaves the list of credits waiting for a lead.
            browser.wait(lambda: not [r for r in browser.rows("approvals") if r[0] == str(approval)],
                         what="the approval gone from the credits waiting")
        finally:
            browser.quit()
        self.assertEqual(set(stack.lookup_player(player)), {first["transaction_id"], second["transaction_id"]})
        event = wait_until(lambda: stack.event(order_id=f"order-cap2-{self.id_}"), 30, "the approved credit's event")
        self.assertEqual((event["user_id"], event["credited_by"]), (player, f"agent-cap-{self.id_}@studio.test"))
        self.assertEqual(stack.metric("receipt_worker_desk_credits_total", outcome="approved_credited", role="lead"),
                         approved_before + 1)
        lines = [(l["agent"], l["action"], l["outcome"]) for l in stack.audit(player=player)]
        self.assertEqual(lines, [("lee", "approve", "credited"), (f"agent-cap-{self.id_}", "credit", "held"),
                                 (f"agent-cap-{self.id_}", "credit", "credited")])
        refusal = [l for l in stack.audit(agent=f"agent-cap-{self.id_}") if l["action"] == "approve"]
        self.assertEqual([(l["outcome"], l["request"]) for l in refusal], [("refused", {"approval_id": approval})])

    def test_a_lead_cannot_approve_their_own_held_credit_another_lead_can(self):
        stack = self.stack
        first, second = (stack.purchase(customer=f"lead-customer-{self.id_}") for _ in range(2))
        player, ticket = f"player-lead-{self.id_}", f"HD-{self.id_}"
        answer = stack.api("POST", "/desk/api/credit",
                           self.credit_body(first, player, f"order-lead1-{self.id_}", ticket),
                           token=stack.token(f"agent-lead-{self.id_}", "agent"))
        self.assertEqual(answer.status, 200, answer)
        lee, lou = stack.mint(sub="lee"), stack.mint(sub="lou")
        answer = stack.api("POST", "/desk/api/credit",
                           self.credit_body(second, player, f"order-lead2-{self.id_}", ticket), token=lee)
        self.assertEqual((answer.status, answer.json()["outcome"]), (202, "held"), answer)
        approval = answer.json()["approval_id"]
        answer = stack.api("POST", f"/desk/api/approvals/{approval}/approve", {"ticket": ticket}, token=lee)
        self.assertEqual((answer.status, answer.json()["outcome"]), (403, "refused"), answer)
        self.assertEqual(set(stack.lookup_player(player)), {first["transaction_id"]})
        answer = stack.api("POST", f"/desk/api/approvals/{approval}/approve", {"ticket": ticket}, token=lou)
        self.assertEqual((answer.status, answer.json()["outcome"]), (200, "credited"), answer)
        self.assertEqual(set(stack.lookup_player(player)), {first["transaction_id"], second["transaction_id"]})
        answer = stack.api("POST", f"/desk/api/approvals/{approval}/approve", {"ticket": ticket}, token=lou)
        self.assertEqual(answer.status, 409, answer)
        lines = [(l["agent"], l["action"], l["outcome"]) for l in stack.audit(player=player)]
        # The second approval, refused (decided already), is audited too.
        self.assertEqual(lines, [("lou", "approve", "refused"), ("lou", "approve", "credited"),
                                 ("lee", "approve", "refused"), ("lee", "credit", "held"),
                                 (f"agent-lead-{self.id_}", "credit", "credited")])
        wait_until(lambda: stack.event(order_id=f"order-lead2-{self.id_}"), 30, "the approved credit's event")

    def test_a_credit_the_ledger_refuses_is_audited_and_gives_its_place_under_the_cap_back(self):
        stack = self.stack
        player, ticket = f"player-refused-{self.id_}", f"HD-{self.id_}"
        agent = stack.token(f"agent-refused-{self.id_}", "agent")
        # The job's purchase is its order's already: crediting it to another player is refused.
        answer = stack.api("POST", "/desk/api/credit",
                           self.credit_body(stack.job_purchase, player, f"order-refused-{self.id_}", ticket),
                           token=agent)
        self.assertEqual(answer.json()["outcome"], "refused", answer)
        self.assertEqual(answer.status, 422, answer)
        self.assertIn(stack.job_order, answer.json()["note"])
        # Its place under the player's cap (1 a day) is given back: the player's next credit is not held.
        purchase = stack.purchase(customer=f"refused-customer-{self.id_}")
        answer = stack.api("POST", "/desk/api/credit",
                           self.credit_body(purchase, player, f"order-refused2-{self.id_}", ticket), token=agent)
        self.assertEqual((answer.status, answer.json()["outcome"]), (200, "credited"), answer)
        self.assertEqual(set(stack.lookup_player(player)), {purchase["transaction_id"]})
        self.assertEqual([(l["action"], l["outcome"]) for l in stack.audit(player=player)],
                         [("credit", "credited"), ("credit", "refused")])
        wait_until(lambda: stack.event(order_id=f"order-refused2-{self.id_}"), 30, "the second credit's event")
        self.assertIsNone(stack.event(order_id=f"order-refused-{self.id_}"))

    # --- sessions the studio can end, limits that hold under a burst -------------------------------------------
    def test_a_session_signed_out_or_ended_by_a_lead_is_refused_when_its_cookie_comes_back(self):
        stack = self.stack
        player = f"player-session-{self.id_}"
        lookup = {"ticket": f"HD-{self.id_}", "user_id": player}

        def session_headers(cookie):
            answer = stack.api("GET", "/desk/api/session", headers={"Cookie": f"__Host-desk-session={cookie}"})
            self.assertEqual(answer.status, 200, answer)
            return {"Cookie": f"__Host-desk-session={cookie}", "Origin": stack.desk,
                    "X-CSRF-Token": answer.json()["csrf_token"]}

        # Signed out: the cookie copied before the sign-out (a shared computer, a proxy's log) opens nothing.
        signed_out = session_headers(stack.session_cookie("bob")["session"])
        self.assertEqual(stack.api("POST", "/desk/api/lookup", lookup, headers=signed_out).status, 200)
        self.assertEqual(stack.api("POST", "/desk/logout", {}, headers=signed_out).status, 200)
        for method, path, body in (("POST", "/desk/api/lookup", lookup), ("GET", "/desk/api/session", None),
                                   ("GET", "/desk/api/audit", None)):
            with self.subTest(f"{path} after the sign-out"):
                answer = stack.api(method, path, body, headers=signed_out)
                self.assertEqual(answer.status, 401, answer)
        # A lead ends an agent's sessions: every session of the agent, at once.
        first = session_headers(stack.session_cookie("bob")["session"])
        second = session_headers(stack.session_cookie("bob")["session"])
        lou = stack.lead_token()
        listed = stack.api("GET", "/desk/api/sessions", token=lou)
        self.assertEqual(listed.status, 200, listed)
        self.assertGreaterEqual(len([s for s in listed.json()["sessions"] if s["agent"] == "bob"]), 2)
        self.assertEqual(stack.api("GET", "/desk/api/sessions", token=stack.token(f"a-{self.id_}", "agent")).status,
                         403)
        refused = stack.api("POST", "/desk/api/sessions/end", {"ticket": f"HD-{self.id_}", "agent": "bob"},
                            token=stack.token(f"agent-ends-{self.id_}", "agent"))
        self.assertEqual(refused.status, 403, refused)
        ended = stack.api("POST", "/desk/api/sessions/end", {"ticket": f"HD-{self.id_}", "agent": "bob"}, token=lou)
        self.assertEqual((ended.status, ended.json()["outcome"]), (200, "ended"), ended)
        self.assertGreaterEqual(ended.json()["ended"], 2)
        for headers in (first, second):
            self.assertEqual(stack.api("POST", "/desk/api/lookup", lookup, headers=headers).status, 401)
        # Only the lookup made before the sign-out is bob's; the lead's act and the agent's refusal are audited.
        self.assertEqual([(l["agent"], l["action"]) for l in stack.audit(player=player)], [("bob", "lookup")])
        ends = [(l["agent"], l["outcome"], l["request"]) for l in stack.audit() if l["action"] == "end_sessions"
                and l["ticket"] == f"HD-{self.id_}"]
        self.assertEqual(ends, [("lou", "ended", {"agent": "bob"}),
                                (f"agent-ends-{self.id_}", "refused", {"agent": "bob"})])
        # The sign-out is in the audit too: when a sign-in ended, not only how.
        self.assertIn(("sign_out", "signed out"), [(l["action"], l["outcome"]) for l in stack.audit(agent="bob")])

    def test_a_session_whose_agent_spent_the_rate_still_signs_out_and_its_cookie_opens_nothing_after(self):
        stack = self.stack
        cookie = stack.session_cookie("rio")["session"]
        opened = stack.api("GET", "/desk/api/session", headers={"Cookie": f"__Host-desk-session={cookie}"})
        self.assertEqual(opened.status, 200, opened)
        headers = {"Cookie": f"__Host-desk-session={cookie}", "Origin": stack.desk,
                   "X-CSRF-Token": opened.json()["csrf_token"]}
        lookup = {"ticket": f"HD-{self.id_}", "user_id": f"player-rate-{self.id_}"}
        # A burst past the agent's 60 a minute (a token back each second): the last of them refused.
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
            statuses = list(pool.map(lambda _: stack.api("POST", "/desk/api/lookup", lookup, headers=headers).status,
                                     range(150)))
        lasted = time.monotonic() - started
        self.assertIn(429, statuses, f"{statuses} in {lasted:.1f} s")
        self.assertEqual(set(statuses), {200, 429}, statuses)
        # The first refusal of a run is audited, not each: a run starts again only after a request let through, so
        # at most one audited refusal for each token refilled during the burst (one a second).
        refused = [l for l in stack.audit(agent="rio") if l["outcome"] == "refused" and l["ticket"] == "-"]
        self.assertGreaterEqual(len(refused), 1)
        self.assertLessEqual(len(refused), 2 + int(lasted), f"{len(refused)} audited in {lasted:.1f} s")
        # Reads have a bound of their own (300 a minute, five back each second): a loop of audit reads is cut short.
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
            reads = list(pool.map(lambda _: stack.api("GET", "/desk/api/audit?limit=1", headers=headers).status,
                                  range(700)))
        self.assertIn(429, reads, f"in {time.monotonic() - started:.1f} s")
        self.assertEqual(set(reads), {200, 429}, reads)
        # The session's own read is never refused: the console would show its signed-out page over an open session.
        self.assertEqual(stack.api("GET", "/desk/api/session", headers=headers).status, 200)
        signed_out = stack.api("POST", "/desk/logout", {}, headers=headers)
        self.assertEqual(signed_out.status, 200, signed_out)
        self.assertEqual(signed_out.cookies().get("__Host-desk-session"), "", "the browser's cookie cleared")
        self.assertEqual(stack.api("GET", "/desk/api/session", headers=headers).status, 401)

    def test_thirty_credits_at_once_over_the_cap_leave_exactly_twenty_held_and_each_refusal_audited(self):
        stack = self.stack
        subject, player, ticket = f"agent-burst-{self.id_}", f"player-burst-{self.id_}", f"HD-{self.id_}"
        agent = stack.token(subject, "agent")
        first = stack.purchase(customer=f"burst-customer-{self.id_}")
        answer = stack.api("POST", "/desk/api/credit",
                           self.credit_body(first, player, f"order-burst-{self.id_}", ticket), token=agent)
        self.assertEqual((answer.status, answer.json()["outcome"]), (200, "credited"), answer)
        # The player's cap is spent: each of the thirty is over it, sent all at once.
        purchases = [stack.purchase(customer=f"burst-customer-{self.id_}-{n}") for n in range(30)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=30) as pool:
            answers = list(pool.map(
                lambda n: stack.api("POST", "/desk/api/credit",
                                    self.credit_body(purchases[n], player, f"order-burst-{self.id_}-{n}", ticket),
                                    token=agent), range(30)))
        statuses = sorted(a.status for a in answers)
        self.assertEqual(statuses, [202] * 20 + [429] * 10, [a.json() for a in answers if a.status not in (202, 429)])
        held = [h for h in stack.api("GET", "/desk/api/approvals", token=stack.lead_token()).json()["approvals"]
                if h["requested_by"] == subject]
        self.assertEqual(len(held), 20)
        lines = [(l["action"], l["outcome"]) for l in stack.audit(agent=subject)]
        self.assertEqual(sorted(lines), sorted([("credit", "credited")] + [("credit", "held")] * 20
                                               + [("credit", "refused")] * 10))
        self.assertEqual(set(stack.lookup_player(player)), {first["transaction_id"]})

    def test_each_refused_decision_is_audited_once(self):
        stack = self.stack
        lou = stack.lead_token()
        ticket = f"HD-{self.id_}"
        missing = 987_654_321
        def decide(approval, decision):
            body = {"ticket": ticket, **({"reason": "not this one"} if decision == "reject" else {})}
            return stack.api("POST", f"/desk/api/approvals/{approval}/{decision}", body, token=lou)

        for decision in ("approve", "reject"):
            answer = decide(missing, decision)
            self.assertEqual(answer.status, 404, answer)
        # A credit held, rejected, then decided again: 409, audited.
        purchase, first = stack.purchase(customer=f"refusal-{self.id_}"), stack.purchase(customer=f"refusal-{self.id_}")
        player = f"player-refusal-{self.id_}"
        agent = stack.token(f"agent-refusal-{self.id_}", "agent")
        stack.api("POST", "/desk/api/credit", self.credit_body(first, player, f"order-r1-{self.id_}", ticket),
                  token=agent)
        held = stack.api("POST", "/desk/api/credit", self.credit_body(purchase, player, f"order-r2-{self.id_}", ticket),
                         token=agent)
        self.assertEqual(held.status, 202, held)
        approval = held.json()["approval_id"]
        rejected = decide(approval, "reject")
        self.assertEqual(rejected.status, 200, rejected)
        for decision in ("approve", "reject"):
            answer = decide(approval, decision)
            self.assertEqual(answer.status, 409, answer)
        lines = [(l["action"], l["outcome"], l["request"]) for l in stack.audit(agent="lou")
                 if l["ticket"] == ticket]
        self.assertEqual(sorted(lines, key=repr), sorted([
            ("approve", "refused", {"approval_id": missing}), ("reject", "refused", {"approval_id": missing}),
            ("reject", "rejected", {"approval_id": approval}), ("approve", "refused", {"approval_id": approval}),
            ("reject", "refused", {"approval_id": approval})], key=repr))

    # --- hostile callers ---------------------------------------------------------------------------------------
    def test_hostile_tokens_are_refused_with_nothing_recorded(self):
        stack = self.stack
        purchase = stack.purchase(customer=f"hostile-customer-{self.id_}")
        player, order = f"player-hostile-{self.id_}", f"order-hostile-{self.id_}"
        body = self.credit_body(purchase, player, order, f"HD-{self.id_}")
        cases = [  # (what, token or None, status, the refusal's reason in the metrics)
            ("no token", None, 401, "missing"),
            ("expired", stack.mint(exp_offset_s=-3600, iat_offset_s=-7200), 401, "expired"),
            ("forged (a stranger's key)", stack.mint(sign_with="stranger", kid="rsa-1"), 401, "signature"),
            ("alg none", stack.mint(alg="none", kid="rsa-1"), 401, "algorithm"),
            ("HS256 keyed with the provider's public key", stack.mint(alg="HS256"), 401, "algorithm"),
            ("another audience", stack.mint(aud="another-app"), 401, "audience"),
            ("another issuer", stack.mint(iss="https://evil.example"), 401, "issuer"),
            ("not valid yet", stack.mint(nbf_offset_s=3600), 401, "not_yet_valid"),
            ("a key the provider never published", stack.mint(kid="rsa-99"), 401, "unknown_key"),
            ("no support role", stack.mint(sub="nobody"), 403, "no_role"),
            ("the roles in another claim than the configured one",
             stack.mint(claims={"roles": ["support-lead"], "groups": None}), 403, "no_role"),
            ("not a JWT", "not-a-token", 401, "malformed"),
        ]
        for what, token, status, reason in cases:
            with self.subTest(what):
                before = stack.metric("receipt_worker_desk_auth_refusals_total", reason=reason)
                for path, request in (("/desk/api/credit", body),
                                      ("/desk/api/lookup", {"ticket": f"HD-{self.id_}", "user_id": player})):
                    answer = stack.api("POST", path, request, token=token)
                    self.assertEqual(answer.status, status, f"{path}: {answer}")
                    self.assertNotIn("outcome", answer.json())
                self.assertEqual(stack.metric("receipt_worker_desk_auth_refusals_total", reason=reason), before + 2)
        self.assertEqual(stack.audit(player=player), [])
        self.assertEqual([l for l in stack.audit() if l["agent"] == "nobody"], [])
        self.assertEqual(stack.lookup_player(player), {})
        stack.settle_topic()
        self.assertIsNone(stack.event(order_id=order))

    def test_a_session_is_not_usable_cross_site(self):
        stack = self.stack
        purchase = stack.purchase(customer=f"csrf-customer-{self.id_}")
        player, order = f"player-csrf-{self.id_}", f"order-csrf-{self.id_}"
        signed_in = stack.session_cookie("bob")
        cookie = signed_in["session"]
        session = stack.api("GET", "/desk/api/session", headers={"Cookie": f"__Host-desk-session={cookie}"})
        self.assertEqual(session.status, 200, session)
        csrf = session.json()["csrf_token"]
        body = self.credit_body(purchase, player, order, f"HD-{self.id_}")
        right = {"Cookie": f"__Host-desk-session={cookie}", "Origin": stack.desk, "X-CSRF-Token": csrf}
        before = {reason: stack.metric("receipt_worker_desk_auth_refusals_total", reason=reason)
                  for reason in ("csrf", "origin")}
        cases = [
            ("no CSRF token (a replayed or cross-site request)", {**right, "X-CSRF-Token": None}, body, 403),
            ("a wrong CSRF token", {**right, "X-CSRF-Token": "x" * len(csrf)}, body, 403),
            ("another site's origin", {**right, "Origin": "http://evil.example"}, body, 403),
            ("no origin", {**right, "Origin": None}, body, 403),
            ("a form-encoded POST", {**right, "Content-Type": "application/x-www-form-urlencoded"},
             urllib.parse.urlencode(body), 415),
            ("a text/plain POST (a cross-site form's enctype)", {**right, "Content-Type": "text/plain"},
             json.dumps(body), 415),
        ]
        for what, headers, request, status in cases:
            with self.subTest(what):
                headers = {k: v for k, v in headers.items() if v is not None}
                answer = stack.api("POST", "/desk/api/credit", request, headers=headers)
                self.assertEqual(answer.status, status, answer)
        self.assertEqual(stack.metric("receipt_worker_desk_auth_refusals_total", reason="csrf"), before["csrf"] + 2)
        self.assertEqual(stack.metric("receipt_worker_desk_auth_refusals_total", reason="origin"),
                         before["origin"] + 2)
        # The same session, asked rightly, works: the refusals above were the desk's rules, not a dead session.
        answer = stack.api("POST", "/desk/api/lookup", {"ticket": f"HD-{self.id_}", "user_id": player},
                           headers=right)
        self.assertEqual(answer.status, 200, answer)
        self.assertEqual([(l["agent"], l["action"]) for l in stack.audit(player=player)], [("bob", "lookup")])
        self.assertEqual(stack.lookup_player(player), {})
        stack.settle_topic()
        self.assertIsNone(stack.event(order_id=order))
        # A cookie changed by one character, or made up, is no session.
        tampered = cookie[:-2] + ("A" if cookie[-2] != "A" else "B") + cookie[-1]
        for what, value in (("tampered", tampered), ("made up", secrets.token_urlsafe(60))):
            with self.subTest(what):
                answer = stack.api("POST", "/desk/api/lookup", {"ticket": f"HD-{self.id_}", "user_id": player},
                                   headers={**right, "Cookie": f"__Host-desk-session={value}"})
                self.assertEqual(answer.status, 401, answer)
        # The sign-in's callback replayed (its code is single-use), or reached without the sign-in's own cookie
        # (a login forced from another site), makes no session, and the provider is not asked (each exchange sends
        # the desk's client secret: a loop of them could get the client throttled).
        def exchanges():
            return http("GET", f"{stack.issuer}/test/stats", context=stack.tls).json().get("token", 0)
        asked = exchanges()
        for what, headers in (("replayed", {"Cookie": f"__Host-desk-signin={signed_in['signin']}"}),
                              ("without the sign-in's cookie", {})):
            with self.subTest(what):
                for _ in range(3):
                    answer = http("GET", signed_in["callback"], headers=headers)
                    self.assertEqual(answer.status, 403, answer)
                    self.assertNotIn("__Host-desk-session", {k for k, v in answer.cookies().items() if v})
        self.assertEqual(exchanges(), asked, "a replayed callback was exchanged at the provider")
        self.assertEqual([(l["agent"], l["action"]) for l in stack.audit(player=player)], [("bob", "lookup")])
        # Signed out, the cookie is cleared.
        answer = stack.api("POST", "/desk/logout", {}, headers=right)
        self.assertEqual(answer.status, 200, answer)
        self.assertEqual(answer.cookies().get("__Host-desk-session"), "")

    def test_hostile_bytes_are_refused_before_anything_is_asked_or_audited(self):
        stack = self.stack
        subject = f"agent-bytes-{self.id_}"
        token = stack.token(subject, "agent")
        purchase = stack.purchase(customer=f"bytes-customer-{self.id_}")
        good = self.credit_body(purchase, f"player-bytes-{self.id_}", f"order-bytes-{self.id_}", f"HD-{self.id_}")
        hostile = {
            "control characters": "player\u0000\u001b[31m\u0007",
            "a DEL and a C1 control": "player\u007f\u0085",
            "a run of combining marks": "p" + "\u0301\u0302\u0303\u0304\u0305\u0306" * 3,
            "a bidirectional override": "player\u202egnp.exe",
            "a line separator": "player\u2028two",
            "10 KB": "p" * 10_240,
            "empty": "",
        }
        requests = []
        for what, value in hostile.items():
            requests += [
                (f"credit, player of {what}", "/desk/api/credit", json.dumps({**good, "user_id": value})),
                (f"credit, order of {what}", "/desk/api/credit", json.dumps({**good, "order_id": value})),
                (f"credit, ticket of {what}", "/desk/api/credit", json.dumps({**good, "ticket": value})),
                (f"lookup, player of {what}", "/desk/api/lookup",
                 json.dumps({"ticket": f"HD-{self.id_}", "user_id": value})),
                (f"lookup, ticket of {what}", "/desk/api/lookup",
                 json.dumps({"ticket": value, "user_id": f"player-bytes-{self.id_}"})),
            ]
        requests += [
            ("a ticket with a space", "/desk/api/lookup", json.dumps({"ticket": "HD 1", "user_id": "p"})),
            ("a non-JSON body", "/desk/api/credit", "ticket=HD-1&user_id=p"),
            ("a JSON array", "/desk/api/credit", json.dumps([good])),
            ("a JSON string", "/desk/api/lookup", json.dumps("HD-1")),
            ("invalid UTF-8", "/desk/api/lookup", b'{"ticket": "HD-1", "user_id": "p\xff\xfe"}'),
            ("an unknown field", "/desk/api/credit", json.dumps({**good, "credited_by": "someone-else"})),
            ("an unknown field in a lookup", "/desk/api/lookup",
             json.dumps({"ticket": "HD-1", "user_id": "p", "role": "lead"})),
            ("a number for a player", "/desk/api/credit", json.dumps({**good, "user_id": 42})),
            ("a transaction id of letters", "/desk/api/credit", json.dumps({**good, "transaction_id": "20000x"})),
            ("two questions at once", "/desk/api/lookup",
             json.dumps({"ticket": "HD-1", "user_id": "p", "order_id": "o"})),
            ("no proof it is the player's", "/desk/api/credit",
             json.dumps({k: v for k, v in good.items() if k != "apple_order_id"})),
            ("an approval with an unknown field", "/desk/api/approvals/1/approve",
             json.dumps({"ticket": "HD-1", "force": True})),
        ]
        for what, path, body in requests:
            with self.subTest(what):
                answer = stack.api("POST", path, body, token=token, headers={"Content-Type": "application/json"})
                self.assertEqual(answer.status, 400, answer)
                self.assertIn("error", answer.json())
                if isinstance(body, str) and len(body) < 12_000:
                    for value in hostile.values():  # the answer never repeats the hostile value
                        if value and value != "p" * 10_240:
                            self.assertNotIn(value, answer.body.decode("utf-8", "replace"))
        self.assertEqual(stack.audit(agent=subject), [])
        self.assertEqual(stack.lookup_player(f"player-bytes-{self.id_}"), {})
        stack.settle_topic()
        self.assertIsNone(stack.event(order_id=f"order-bytes-{self.id_}"))

    # --- the audit for operators ---------------------------------------------------------------------------------
    def test_the_audit_cli_lists_the_desks_lines_as_json_filtered_by_player_and_agent(self):
        stack = self.stack
        purchase = stack.purchase(customer=f"audit-customer-{self.id_}")
        player, other, ticket = f"player-audit-{self.id_}", f"player-audit-other-{self.id_}", f"HD-{self.id_}"
        agent, viewer = f"agent-audit-{self.id_}", f"viewer-audit-{self.id_}"
        answer = stack.api("POST", "/desk/api/lookup", {"ticket": ticket, "user_id": player},
                           token=stack.token(viewer, "viewer"))
        self.assertEqual(answer.status, 200, answer)
        answer = stack.api("POST", "/desk/api/credit",
                           self.credit_body(purchase, player, f"order-audit-{self.id_}", ticket),
                           token=stack.token(agent, "agent"))
        self.assertEqual(answer.status, 200, answer)
        event_id = answer.json()["event_id"]
        answer = stack.api("POST", "/desk/api/lookup", {"ticket": ticket, "user_id": other},
                           token=stack.token(agent, "agent"))
        self.assertEqual(answer.status, 200, answer)

        def cli(*filters):
            lines = [json.loads(line) for line in stack.tool("ledger", "audit", "--json", *filters).splitlines()]
            return [line for line in lines if line["ticket"] == ticket]

        everything = cli()
        self.assertEqual([(l["agent"], l["action"], l["outcome"], l["player"]) for l in everything],
                         [(agent, "lookup", "not_found", other), (agent, "credit", "credited", player),
                          (viewer, "lookup", "not_found", player)])
        credit = everything[1]
        self.assertEqual((credit["role"], credit["agent_name"], credit["app"]),
                         ("agent", f"{agent}@studio.test", "default"))
        self.assertEqual(credit["answer"]["event_id"], event_id)
        self.assertEqual(credit["request"]["transaction_id"], purchase["transaction_id"])
        self.assertRegex(credit["at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
        self.assertEqual([(l["agent"], l["action"]) for l in cli("--player", player)],
                         [(agent, "credit"), (viewer, "lookup")])
        self.assertEqual([(l["action"], l["player"]) for l in cli("--agent", agent)],
                         [("lookup", other), ("credit", player)])
        self.assertEqual([(l["action"], l["player"]) for l in cli("--agent", agent, "--player", player)],
                         [("credit", player)])
        self.assertEqual(cli("--agent", f"nobody-{self.id_}"), [])
        text = stack.tool("ledger", "audit", "--player", player).splitlines()
        self.assertTrue(any("credit" in line and "credited" in line and f"ticket {ticket}" in line for line in text),
                        text)

    @staticmethod
    def _alert(browser):
        try:
            return browser.driver.switch_to.alert.text.startswith("Extend every active subscriber of")
        except Exception:
            return False

    # --- a player's data -----------------------------------------------------------------------------------------
    def test_a_lead_exports_a_players_data_that_meets_its_schema_and_a_viewer_is_refused(self):
        from jsonschema import Draft7Validator
        stack = self.stack
        ticket = f"GDPR-{self.id_}"
        browser = Browser(stack, "lee")
        try:
            browser.wait(lambda: browser.element("export-form").is_displayed(), what="a lead is offered the export")
            browser.element("ticket").send_keys(ticket)
            browser.element("export-user").send_keys(stack.job_player)
            browser.element("export-submit").click()
            outcome = browser.wait(lambda: browser.text("export-outcome"), what="the export's outcome")
            self.assertTrue(outcome.startswith("exported: 1 grants, 1 answers"), outcome)
            self.assertTrue(browser.element("export-file").is_displayed(), "a file to download")
            answer = browser.fetch("POST", "/desk/api/player/export", {"ticket": ticket, "user_id": stack.job_player})
        finally:
            browser.quit()
        self.assertEqual(answer["status"], 200, answer)
        document = answer["answer"]
        with open(os.path.join(HERE, "..", "..", "docs", "schemas", "player-export.json")) as file:
            schema = json.load(file)
        problems = [error.message for error in Draft7Validator(
            schema, format_checker=Draft7Validator.FORMAT_CHECKER).iter_errors(document)]
        self.assertEqual(problems, [])
        self.assertEqual([g["order_id"] for g in document["grants"]], [stack.job_order])
        self.assertEqual(document["answers"][0]["event"]["decision"], "grant")
        self.assertEqual(document["answers"][0]["event"]["user_id"], stack.job_player)
        # A viewer may not: refused and audited.
        answer = stack.api("POST", "/desk/api/player/export", {"ticket": ticket, "user_id": stack.job_player},
                           token=stack.mint(sub="vic"))
        self.assertEqual(answer.status, 403, answer)
        lines = [(l["agent"], l["action"], l["outcome"]) for l in stack.audit(player=stack.job_player)
                 if l["ticket"] == ticket]
        self.assertEqual(lines, [("vic", "export", "refused"), ("lee", "export", "exported"),
                                 ("lee", "export", "exported")])

    def test_a_lead_erases_a_player_in_the_console_the_event_published_and_a_viewer_is_refused(self):
        stack = self.stack
        purchase = stack.purchase(customer=f"erase-customer-{self.id_}")
        player, ticket, order = f"player-erase-{self.id_}", f"GDPR-E-{self.id_}", f"order-erase-{self.id_}"
        answer = stack.api("POST", "/desk/api/credit", self.credit_body(purchase, player, order, ticket),
                           token=stack.token(f"agent-erase-{self.id_}", "agent"))
        self.assertEqual(answer.status, 200, answer)
        # A viewer may not: refused, audited without naming the player.
        answer = stack.api("POST", "/desk/api/player/erase", {"ticket": ticket, "user_id": player},
                           token=stack.mint(sub="vic"))
        self.assertEqual(answer.status, 403, answer)
        browser = Browser(stack, "lee")
        try:
            browser.wait(lambda: browser.element("erase-submit").is_displayed(), what="a lead is offered the erasure")
            browser.element("ticket").send_keys(ticket)
            browser.element("export-user").send_keys(player)
            browser.element("erase-submit").click()
            browser.wait(lambda: self._confirmed(browser, "Erase player " + player), what="the console asks first")
            browser.driver.switch_to.alert.accept()
            outcome = browser.wait(lambda: browser.text("export-outcome"), what="the erasure's outcome")
            self.assertRegex(outcome, r"^erased: the player is erased-[0-9a-f]{24} now$")
        finally:
            browser.quit()
        pseudonym = outcome.split()[-2]
        self.assertEqual(stack.lookup_player(player), {}, "nothing granted to the erased id any more")
        self.assertEqual(list(stack.lookup_player(pseudonym)), [purchase["transaction_id"]], "kept, by pseudonym")
        event = wait_until(lambda: stack.event(type="player.erased", user_id=player), 30, "player.erased")
        self.assertEqual(event["pseudonym"], pseudonym)
        lines = [(l["agent"], l["action"], l["outcome"], l["player"]) for l in stack.audit() if l["ticket"] == ticket]
        self.assertEqual(lines[:2], [("lee", "erase", "erased", pseudonym), ("vic", "erase", "refused", None)])
        self.assertNotIn(player, json.dumps(stack.audit()), "no audit line names the erased player")

    @staticmethod
    def _confirmed(browser, prefix):
        try:
            return browser.driver.switch_to.alert.text.startswith(prefix)
        except Exception:
            return False

    # --- amends after an outage ------------------------------------------------------------------------------
    def test_a_lead_extends_one_subscription_and_every_subscriber_in_the_console_and_a_viewer_is_refused(self):
        stack = self.stack
        product, ticket = f"vip_{self.id_}", f"OUT-{self.id_}"
        one, other = (stack.purchase(customer=f"ext-{n}-{self.id_}", product_id=product, type="subscription")
                      for n in ("a", "b"))
        browser = Browser(stack, "lee")
        try:
            browser.wait(lambda: browser.element("extend-form").is_displayed(), what="a lead is offered the amends")
            browser.element("ticket").send_keys(ticket)
            browser.element("extend-original").send_keys(one["transaction_id"])
            days = browser.element("extend-days")
            days.clear()
            days.send_keys("2")
            browser.element("extend-submit").click()
            outcome = browser.wait(lambda: browser.text("extend-outcome"), what="the extension's outcome")
            self.assertTrue(outcome.startswith("extended: now ends 20"), outcome)

            # Every subscriber of the product: started at once, then followed to its counts.
            browser.element("extend-original").clear()
            browser.element("extend-product").send_keys(product)
            browser.driver.execute_script("document.getElementById('extend-outcome').textContent = ''")
            browser.element("extend-submit").click()
            browser.wait(lambda: self._alert(browser), what="the console asks to confirm a mass extension")
            browser.driver.switch_to.alert.accept()
            outcome = browser.wait(lambda: browser.text("extend-outcome"), what="the mass extension's outcome")
            self.assertTrue(outcome.startswith("started: request "), outcome)
            request = outcome.split()[-1]
            button = f"#extensions button.extension-status[data-request='{request}']"
            browser.wait(lambda: browser.driver.find_elements(By.CSS_SELECTOR, button), what="the request listed")
            listed = [r for r in browser.rows("extensions") if r[4] == request][0]
            self.assertEqual(listed[1:4], ["lee@studio.test", product, "2"])

            def status():
                browser.driver.find_element(By.CSS_SELECTOR, button).click()
                time.sleep(0.2)
                return [r for r in browser.rows("extensions") if r[4] == request][0][5].startswith("done")
            browser.wait(status, timeout=20, what="the mass extension done")
            self.assertEqual([r for r in browser.rows("extensions") if r[4] == request][0][5],
                             "done: 2 extended, 0 not")
        finally:
            browser.quit()

        # A viewer sees the requests, is offered no extension, and is refused one (audited).
        browser = Browser(stack, "vic")
        try:
            browser.wait(lambda: browser.element("amends").is_displayed(), what="the amends shown to a viewer")
            self.assertFalse(browser.element("extend-form").is_displayed(), "a viewer is offered no extension")
            answer = browser.fetch("POST", "/desk/api/extend", {
                "ticket": ticket, "original_transaction_id": other["transaction_id"], "days": 1,
                "reason": "service_issue"})
            self.assertEqual((answer["status"], answer["answer"]["outcome"]), (403, "refused"), answer)
        finally:
            browser.quit()
        # Apple's limit: a third extension of the first subscription in a year is refused with Apple's reason.
        answer = stack.api("POST", "/desk/api/extend", {
            "ticket": ticket, "original_transaction_id": one["transaction_id"], "days": 1, "reason": "other"},
            token=stack.lead_token())
        self.assertEqual(answer.status, 409, answer)
        self.assertIn("4030005", answer.json()["error"])
        lines = [(l["agent"], l["action"], l["outcome"]) for l in stack.audit() if l["ticket"] == ticket]
        self.assertEqual(lines, [("lou", "extend", "refused"), ("vic", "extend", "refused"),
                                 ("lee", "extend_all", "started"), ("lee", "extend", "extended")])


class SQLiteLedger(DeskTests, unittest.TestCase):
    LEDGER = "sqlite"


@unittest.skipUnless(os.environ.get("POSTGRES_URL"), "POSTGRES_URL is not set")
class PostgreSQLLedger(DeskTests, unittest.TestCase):
    LEDGER = "postgres"


def _clean_up():
    """The run's files are removed when every test passed (run as a script), but for its screenshots."""
    if not os.listdir(RUN_DIR):
        os.rmdir(RUN_DIR)
        return
    if os.environ.get("DESK_KEEP") or not _passed[0]:
        log(f"the run's files are kept in {RUN_DIR}")
        return
    for name in os.listdir(RUN_DIR):
        path = os.path.join(RUN_DIR, name)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif not name.endswith(".png"):
            os.remove(path)
    if not os.listdir(RUN_DIR):
        os.rmdir(RUN_DIR)


_passed = [False]
atexit.register(_clean_up)


if __name__ == "__main__":
    program = unittest.main(exit=False, verbosity=2)
    _passed[0] = program.result.wasSuccessful()
    sys.exit(0 if _passed[0] else 1)
