#!/usr/bin/env python3
"""docs/metrics.md's table against what the processes export, both ways: every metric's name, type, labels, and the
values of each label whose values are a fixed set.

    python3 Tests/docs/check_metrics.py [--binary .build/debug/receipt-worker] [--print]

What the code exports is read from a real /metrics page: the check starts `receipt-worker run` and
`receipt-worker desk` on free loopback ports with a throwaway SQLite ledger and a broker address where nothing
listens (no broker is needed: the metrics port answers while the process waits for its broker, every family
registered), scrapes each once its families stop changing, and stops it. Series that exist from the start (most of
them: the worker registers every value of a fixed set at 0, so that a dashboard reads 0) give each family's type,
labels and values. The few families or values that only appear while something happens are read from the Swift
sources, each with the pattern written below (SOURCE_VALUES, LAZY); a pattern that no longer finds anything fails,
so a change of the code cannot leave it behind silently.

The table's rows: | metric(s) | type | labels | meaning |. The labels cell lists each label as `name`, followed, for
a label with a fixed set of values, by all of them in parentheses: `outcome` (`ok`, `timeout`). `-` when there are
none. Labels whose values are names (apps, topics, partitions, currencies, HTTP statuses, the build) are OPEN: their
values are not listed there. --print shows what the processes export, in that form."""
import argparse
import concurrent.futures
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SOURCES = ROOT / "Sources"
DOC = ROOT / "docs" / "metrics.md"
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from free_port import free_port  # noqa: E402

# Labels whose values are names, not a fixed set: the configured apps (and `other`, `default`), the groups (apps,
# `notifications`, `consumption:APP`), the broker's topics and partitions, ISO 4217 currencies, HTTP statuses, the
# build's version, revision and allocator (its name and release); and Apple's notificationType, whose values
# docs/contract.md's table lists (section 9; ContractDocumentTests holds that table to NotificationType).
OPEN = {"app", "group", "topic", "partition", "currency", "status", "version", "revision", "allocator", "type"}


def source(path):
    return (SOURCES / path).read_text(encoding="utf-8")


def swift_files(directory):
    return sorted((SOURCES / directory).rglob("*.swift"))


def balanced(text, start, opening, closing):
    """The text from `start` (an opening bracket) to its closing bracket, included."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] == opening:
            depth += 1
        elif text[index] == closing:
            depth -= 1
            if depth == 0:
                return text[start:index + 1]
    return text[start:]


def words(text):
    """The string literals of `text` that are label values (lower-case words)."""
    return set(re.findall(r'"([a-z][a-z0-9_]*)"', text))


def call_arguments(files, name):
    """The string literals in the arguments of every call of `name(` in the files."""
    found = set()
    for path in files:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(re.escape(name) + r"\(", text):
            found |= words(balanced(text, match.end() - 1, "(", ")"))
    return found


def function_body(path, signature):
    text = source(path)
    match = re.search(signature, text)
    return balanced(text, text.index("{", match.end()), "{", "}") if match else ""


def enum_values(path, name):
    """The raw values of a Swift `enum NAME: String`'s cases."""
    text = source(path)
    match = re.search(r"enum " + re.escape(name) + r"\b[^{]*\{", text)
    if not match:
        return set()
    body = balanced(text, match.end() - 1, "{", "}")
    values = set()
    for line in re.findall(r"^\s*case ([^\n]+)$", body, re.M):
        items = [item.strip() for item in line.split(",")]
        if all(re.fullmatch(r'[A-Za-z_]\w*(\s*=\s*"[^"]*")?', item) for item in items):  # not a switch's case
            for item in items:
                raw = re.search(r'"([^"]+)"', item)
                values.add(raw.group(1) if raw else item)
    return values


def apple_calls():
    """Every Apple call's name (`endpoint` of the request histogram, `call` of the circuit breakers): the literal
    ones, and those made of an endpoint and the environment."""
    files = swift_files("AppleVerification")
    text = "\n".join(path.read_text(encoding="utf-8") for path in files)
    calls = set(re.findall(r'"([a-z_]+_(?:production|sandbox))"', text))
    bases = set(re.findall(r'call: "([a-z_]+)_\\\(', text)) | set(re.findall(r'lane: "([a-z_]+)", environment:', text))
    return calls | {f"{base}_{environment}" for base in bases for environment in ("production", "sandbox")}


def apple_lanes():
    """Every rate-limit lane's endpoint (Apple's limits are per endpoint)."""
    text = "\n".join(path.read_text(encoding="utf-8") for path in swift_files("AppleVerification"))
    return set(re.findall(r'Lane\(endpoint: "([a-z_]+)"', text)) | set(
        re.findall(r'lane: "([a-z_]+)", environment:', text))


# Values only seen while something happens, each read from the sources: (metric, label) -> a function of nothing.
SOURCE_VALUES = {
    ("receipt_worker_apple_request_duration_seconds", "endpoint"): apple_calls,
    ("receipt_worker_circuit_state", "call"): apple_calls,
    # An answered call's outcome (AppleHTTP.outcome(status:)), or a call that got no answer.
    ("receipt_worker_apple_request_duration_seconds", "outcome"): lambda: words(
        function_body("AppleVerification/AppleHTTP.swift", r"static func outcome\(status")) | call_arguments(
        [SOURCES / "AppleVerification/AppleHTTP.swift"], "observe?") - {"call"},
    ("receipt_worker_apple_lane_pauses_total", "endpoint"): apple_lanes,
    ("receipt_worker_apple_lane_wait_seconds", "endpoint"): apple_lanes,
    ("receipt_worker_apple_lane_wait_seconds", "environment"): lambda: {"production", "sandbox"} & words(
        source("Flows/WorkerMetrics.swift")),
    ("receipt_worker_consumption_answers_total", "outcome"): lambda: call_arguments(
        swift_files("Flows"), "consumptionAnswer"),
    # The policy `none` answers nothing: no series.
    ("receipt_worker_consumption_policy_answers_total", "answer"): lambda: enum_values(
        "Flows/ConsumptionPolicy.swift", "Answer") - {"none"},
    ("receipt_worker_certificate_expiry_timestamp_seconds", "certificate"): lambda: set(
        re.findall(r'sources\.append\(\("([a-z_]+)"', source("ReceiptWorker/CertificateExpiry.swift"))),
    ("receipt_worker_ledger_pool_connections", "state"): lambda: set(re.findall(
        r'\["state": "([a-z_]+)"\]', source("ReceiptWorker/Worker+Upkeep.swift"))),
    ("receipt_worker_desk_requests_total", "route"): lambda: set(re.findall(
        r'return \(\s*"([a-z_]+)",', source("DeskService/HTTP/DeskRouter.swift"))),
    ("receipt_worker_desk_lookups_total", "action"): lambda: set(re.findall(
        r'look\(\s*agent, action: "([a-z_]+)"', source("DeskService/Actions/DeskActions.swift"))),
    ("receipt_worker_desk_lookups_total", "outcome"): lambda: set(re.findall(
        r'line\.outcome = report\.purchases\.isEmpty \? "([a-z_]+)" : "([a-z_]+)"',
        source("DeskService/Actions/DeskActions.swift"))[0]) if re.search(
        r'line\.outcome = report', source("DeskService/Actions/DeskActions.swift")) else set(),
    # Refused by the desk's rules: the audited actions, by the asker's role.
    ("receipt_worker_desk_refusals_total", "action"): lambda: set().union(*(set(re.findall(
        r'agent, action: "([a-z_]+)"', path.read_text(encoding="utf-8")))
        for path in swift_files("DeskService/Actions"))) | words(
        function_body("DeskService/Actions/DeskActions.swift", r"static func action\(of path")),
    ("receipt_worker_desk_refusals_total", "role"): lambda: enum_values("DeskService/OIDC/DeskClaims.swift",
                                                                       "AgentRole"),
    # A sign-in refused (by the flow, or by the token check's reason) or done.
    ("receipt_worker_desk_signins_total", "outcome"): lambda: {
        literals[-1] for literals in (re.findall(r'"([a-z_]+)"', balanced(text, m.end() - 1, "(", ")"))
                                      for text in [source("DeskService/HTTP/SignInFlow.swift")]
                                      for m in re.finditer(r"return refused\(", text)) if literals}
        | call_arguments([SOURCES / "DeskService/HTTP/SignInFlow.swift"], "metrics.signedIn")
        | enum_values("DeskService/OIDC/TokenVerifier.swift", "Reason"),
}

# Families with no series until something happens (a partition assigned, a message unanswered, a PostgreSQL
# ledger, a lane's wait, a policy's answer, a desk request): the file that registers each, and its labels there.
LAZY = {
    "receipt_worker_job_lag_seconds": ("Runtime/WaitTracker.swift", ["app", "topic", "partition"]),
    "receipt_worker_notification_lag_seconds": ("Runtime/WaitTracker.swift", ["app", "topic", "partition"]),
    "receipt_worker_topic_paused": ("Runtime/ConsumerRuntime+Metrics.swift", ["topic"]),
    "receipt_worker_partition_committed_offset": ("Runtime/ConsumerRuntime+Metrics.swift", ["topic", "partition"]),
    "receipt_worker_partition_outstanding_jobs": ("Runtime/ConsumerRuntime+Metrics.swift", ["topic", "partition"]),
    "receipt_worker_partition_lag": ("Runtime/ConsumerRuntime+Metrics.swift", ["topic", "partition"]),
    "receipt_worker_partition_idle_seconds": ("Runtime/ConsumerRuntime+Metrics.swift", ["topic", "partition"]),
    "receipt_worker_ledger_pool_connections": ("ReceiptWorker/Worker+Upkeep.swift", ["state"]),
    "receipt_worker_ledger_pool_waiting": ("ReceiptWorker/Worker+Upkeep.swift", []),
    "receipt_worker_ledger_pool_waits_total": ("ReceiptWorker/Worker+Upkeep.swift", []),
    "receipt_worker_ledger_round_trips_total": ("ReceiptWorker/Worker+Upkeep.swift", []),
    "receipt_worker_apple_lane_wait_seconds": ("Flows/WorkerMetrics.swift", ["app", "endpoint", "environment"]),
    "receipt_worker_consumption_policy_answers_total": ("Flows/WorkerMetrics+Notifications.swift", ["app", "answer"]),
    "receipt_worker_desk_requests_total": ("DeskService/DeskMetrics.swift", ["route", "status"]),
    "receipt_worker_desk_lookups_total": ("DeskService/DeskMetrics.swift", ["action", "outcome"]),
    "receipt_worker_desk_refusals_total": ("DeskService/DeskMetrics.swift", ["action", "role"]),
    "receipt_worker_desk_signins_total": ("DeskService/DeskMetrics.swift", ["outcome"]),
}
KINDS = {"counter": "counter", "counters": "counter", "gauge": "gauge", "gauges": "gauge", "histogram": "histogram"}


# ---- what the processes export ---------------------------------------------------------------------------------



def scrape(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode()
    except OSError:
        return None


def exposition(binary, command, settings, directory):
    """The /metrics page of `receipt-worker COMMAND`, once its families stop changing."""
    port = free_port()
    arguments = [binary, command, "--set", "kafka.bootstrap.servers=127.0.0.1:9", "--set", f"metrics.listen=127.0.0.1:{port}"]
    for key, value in settings.items():
        arguments += ["--set", f"{key}={value}"]
    log = open(directory / f"{command}.log", "w")
    process = subprocess.Popen(arguments, stdout=log, stderr=subprocess.STDOUT, cwd=directory)
    try:
        page, families, stable, deadline = None, None, 0, time.monotonic() + 60
        while time.monotonic() < deadline and stable < 3:
            if process.poll() is not None:
                sys.exit(f"receipt-worker {command} exited ({process.returncode}) before its /metrics was read: "
                         f"{(directory / f'{command}.log').read_text()[-2000:]}")
            time.sleep(0.3)
            page = scrape(f"http://127.0.0.1:{port}/metrics")
            now = None if page is None else re.findall(r"^# TYPE (\S+)", page, re.M)
            stable = stable + 1 if now and now == families else 0
            families = now
        if stable < 3:
            sys.exit(f"receipt-worker {command}: no steady /metrics page within 60 s")
        return page
    finally:
        # Its page is read: a process still waiting for its broker may take seconds to stop, and nothing of it is kept.
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def parse_exposition(page):
    """family -> {"type": t, "labels": {label: set(values)}}."""
    families = {}
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", page, re.M):
        families[name] = {"type": kind, "labels": {}}
    for line in page.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"^([a-z_:][a-z0-9_:]*)(?:\{(.*)\})? \S+$", line)
        if not match:
            continue
        name = match.group(1)
        if name not in families:
            name = re.sub(r"_(bucket|sum|count)$", "", name)
        labels = families[name]["labels"]
        for label, value in re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""):
            if label != "le":
                labels.setdefault(label, set()).add(value)
    return families


def exported(binary):
    with tempfile.TemporaryDirectory() as scratch:
        directory = pathlib.Path(scratch)
        subprocess.run([str(pathlib.Path(binary).parent / "appstore-sim"), "--print-test-root"],
                       stdout=open(directory / "root.pem", "w"), check=True)
        (directory / "session.key").write_text(os.urandom(32).hex())
        (directory / "client.secret").write_text("secret\n")
        common = {
            "apple.bundle_id": "com.example", "apple.app_apple_id": "1234567890",
            "apple.api.key_id": "keyId", "apple.api.issuer_id": "issuerId",
            "apple.api.private_key_file": str(ROOT / "Tests/AppleClientTests/testSigningKey.p8"),
            "ledger.url": f"sqlite:{directory / 'ledger.sqlite'}",
        }
        desk_port = free_port()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            worker = pool.submit(exposition, binary, "run", dict(common, **{
                "apple.root_certificates": str(directory / "root.pem"), "apple.finish_transactions": "true",
                "notifications.listen": f"127.0.0.1:{free_port()}"}), directory)
            desk = pool.submit(exposition, binary, "desk", dict(common, **{
                "desk.listen": f"127.0.0.1:{desk_port}", "desk.public_url": f"http://127.0.0.1:{desk_port}",
                "desk.oidc.issuer": "https://127.0.0.1:9", "desk.oidc.client_id": "desk",
                "desk.oidc.client_secret_file": str(directory / "client.secret"),
                "desk.session_key_file": str(directory / "session.key"),
                "ledger.url": f"sqlite:{directory / 'desk-ledger.sqlite'}"}), directory)
            worker, desk = worker.result(), desk.result()
    families = parse_exposition(worker)
    for name, family in parse_exposition(desk).items():
        families.setdefault(name, family)
    return families


# ---- the sources -------------------------------------------------------------------------------------------------

def registered_names():
    """Every metric name the worker's, the runtime's and the desk's sources register (a quoted literal)."""
    names = {}
    for directory in ("ReceiptWorker", "Runtime", "DeskService"):
        for path in swift_files(directory):
            text = path.read_text(encoding="utf-8")
            for name in re.findall(r'"(receipt_worker_[a-z_]+)"', text):
                names.setdefault(name, path.relative_to(SOURCES).as_posix())
    return names


def code_truth(binary, problems):
    families = exported(binary)
    names = registered_names()
    for name, (path, labels) in LAZY.items():
        text = source(path)
        if name in families and families[name]["labels"]:
            problems.append(f"{name} has series at start-up now: remove it from LAZY (Tests/docs/check_metrics.py)")
            continue
        kind = re.search(r"\.(counters?|gauges?|histogram)\(\s*\"" + re.escape(name) + '"', text)
        if not kind:
            problems.append(f"{path} no longer registers {name} (LAZY, Tests/docs/check_metrics.py)")
            continue
        for label in labels:
            if f'"{label}":' not in text:
                problems.append(f"{path} names no label {label} for {name} (LAZY, Tests/docs/check_metrics.py)")
        families[name] = {"type": KINDS[kind.group(1)], "labels": {label: set() for label in labels}}
    for name in sorted(set(names) - set(families)):
        problems.append(f"{names[name]} registers {name}, which neither process exported at start-up: run the"
                        " code that makes it, or add it to LAZY in Tests/docs/check_metrics.py")
    for (name, label), read in SOURCE_VALUES.items():
        values = read()
        if not values:
            problems.append(f"the sources' pattern for {name}'s {label} finds nothing: Tests/docs/check_metrics.py")
        elif name not in families or label not in families[name]["labels"]:
            problems.append(f"SOURCE_VALUES names {name}'s {label}, which the code does not export")
        else:
            families[name]["labels"][label] |= values
    if len(families) < 50:
        problems.append(f"only {len(families)} metrics found: the check no longer reads the processes' pages")
    return families


# ---- the document ------------------------------------------------------------------------------------------------

def documented(problems):
    """docs/metrics.md's table: name -> {"type", "labels": {label: set(values) or None (open)}, "line"}."""
    table = {}
    lines = DOC.read_text(encoding="utf-8").splitlines()
    header = next((i for i, line in enumerate(lines) if re.match(r"^\| metric \| type \| labels \| meaning \|", line)),
                  None)
    if header is None:
        problems.append("docs/metrics.md has no table headed | metric | type | labels | meaning |")
        return table
    for number, line in enumerate(lines[header + 2:], header + 3):
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 4:
            problems.append(f"docs/metrics.md:{number}: {len(cells)} cells, not 4")
            continue
        names = re.findall(r"`(receipt_worker_[a-z_]+)`", cells[0])
        if not names:
            problems.append(f"docs/metrics.md:{number}: no metric in the first cell")
        labels = {}
        if cells[2] not in ("-", ""):
            for entry in split_top_level(cells[2]):
                match = re.fullmatch(r"`([a-z_]+)`(?:\s*\((.*)\))?", entry.strip())
                if not match:
                    problems.append(f"docs/metrics.md:{number}: cannot read the label {entry.strip()!r}")
                    continue
                values = None if match.group(2) is None else set(re.findall(r"`([^`]+)`", match.group(2)))
                labels[match.group(1)] = values
        for name in names:
            if name in table:
                problems.append(f"docs/metrics.md:{number}: {name} twice in the table")
            table[name] = {"type": cells[1], "labels": labels, "line": number}
    return table


def split_top_level(text):
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return parts + [current]


# ---- both ways -----------------------------------------------------------------------------------------------------

def compare(code, doc, problems):
    for name in sorted(set(code) - set(doc)):
        problems.append(f"{name} is exported, and missing from docs/metrics.md's table")
    for name in sorted(set(doc) - set(code)):
        problems.append(f"docs/metrics.md:{doc[name]['line']}: {name} is not exported by the code")
    for name in sorted(set(code) & set(doc)):
        ours, theirs, where = code[name], doc[name], f"docs/metrics.md:{doc[name]['line']}: {name}"
        if ours["type"] != theirs["type"]:
            problems.append(f"{where}: type {theirs['type']!r}, the code's is {ours['type']!r}")
        for label in sorted(set(ours["labels"]) - set(theirs["labels"])):
            problems.append(f"{where}: label {label} is missing")
        for label in sorted(set(theirs["labels"]) - set(ours["labels"])):
            problems.append(f"{where}: label {label} is not the code's")
        for label in sorted(set(ours["labels"]) & set(theirs["labels"])):
            values, listed = ours["labels"][label], theirs["labels"][label]
            if label in OPEN:
                continue
            if not values:
                problems.append(f"{name}'s {label}: the code's values were not found (add it to SOURCE_VALUES in"
                                " Tests/docs/check_metrics.py, or to OPEN if its values are names)")
            elif listed is None:
                problems.append(f"{where}: label {label} lists no values; the code's are {sorted(values)}")
            elif listed != values:
                missing, extra = sorted(values - listed), sorted(listed - values)
                problems.append(f"{where}: label {label}"
                                + (f": missing {missing}" if missing else "")
                                + (f"; not the code's {extra}" if extra else ""))


def show(code):
    for name in sorted(code):
        family = code[name]
        labels = ", ".join(f"`{label}`" + ("" if label in OPEN or not values else
                                           " (" + ", ".join(f"`{v}`" for v in sorted(values)) + ")")
                           for label, values in sorted(family["labels"].items())) or "-"
        print(f"| `{name}` | {family['type']} | {labels} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(ROOT / ".build" / "debug" / "receipt-worker"))
    parser.add_argument("--print", action="store_true", help="print what the code exports, as table rows")
    arguments = parser.parse_args()
    for binary in (arguments.binary, str(pathlib.Path(arguments.binary).parent / "appstore-sim")):
        if not os.access(binary, os.X_OK):
            sys.exit(f"{binary} is not built: `swift build` first (the test command builds it before this check)")
    problems = []
    code = code_truth(arguments.binary, problems)
    if arguments.print:
        show(code)
        return 0
    doc = documented(problems)
    compare(code, doc, problems)
    for problem in problems:
        print("FAIL  " + problem)
    if problems:
        print(f"{len(problems)} problem(s): docs/metrics.md and the code disagree")
        return 1
    fixed = sum(1 for family in code.values() for label in family["labels"] if label not in OPEN)
    print(f"ok    docs/metrics.md names the {len(code)} metrics the worker and the desk export, their types and"
          f" labels, and every value of their {fixed} labels of a fixed set")
    return 0


if __name__ == "__main__":
    sys.exit(main())
