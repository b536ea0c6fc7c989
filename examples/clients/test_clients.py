#!/usr/bin/env python3
"""The integration guide's producers and consumers (Python and Go) through a real worker: run by the test command
inside scripts/with-services.sh, whose broker it uses (KAFKA_BOOTSTRAP, TANSU_BIN).

    bash scripts/with-services.sh .deps/venv/bin/python examples/clients/test_clients.py

It starts the App Store simulator and `receipt-worker run` (the debug build, SQLite ledger) on the default topics,
buys two purchases at the simulator, sends one job with send_job.py and one with the Go sendjob, reads both grants
with read_results.py; then sends the first purchase again for another order with the Go sendjob and reads the three
events with the Go readresults. Every job the producers sent is valid against docs/schemas/job.json, every event
the consumers printed against its event's schema (strictly, as Tests/contract/check_contract.py does), and each
consumer said what to do with each event."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from confluent_kafka import Consumer, TopicPartition
from jsonschema import Draft7Validator

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "Tests" / "contract"))
from check_contract import strict  # noqa: E402
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from free_port import free_port  # noqa: E402

BIN = ROOT / ".build" / "debug"
RDKAFKA = ROOT / ".deps" / "librdkafka" / "lib"
SCHEMAS = ROOT / "docs" / "schemas"
TOPICS = {"receipt-jobs": 2, "receipt-results": 1, "receipt-dlq": 1, "receipt-notifications": 1,
          "receipt-consumption": 1, "receipt-retries": 1}
BROKER = os.environ["KAFKA_BOOTSTRAP"]




def run(*command, timeout=120, **options):
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=timeout, **options)
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, command))} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def build_go(directory):
    """The Go examples, with Debian's Confluent Go client (scripts/setup.sh) on librdkafka 2.8.0."""
    environment = dict(os.environ, GOPATH=str(ROOT / ".deps" / "gopath"), GO111MODULE="off", GOFLAGS="",
                       PKG_CONFIG_PATH=str(RDKAFKA / "pkgconfig"), CGO_LDFLAGS=f"-Wl,-rpath,{RDKAFKA}")
    run("go", "vet", "./sendjob", "./readresults", cwd=HERE / "go", env=environment, timeout=300)
    run("go", "build", "-o", f"{directory}/", "./sendjob", "./readresults", cwd=HERE / "go", env=environment,
        timeout=300)
    return directory / "sendjob", directory / "readresults"


def wait_for(what, condition, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    sys.exit(f"{what}: not within {seconds} s")


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read()
    except OSError:
        return None, b""


def purchase(simulator, product):
    request = urllib.request.Request(f"{simulator}/admin/purchases", data=json.dumps({"product_id": product}).encode(),
                                     method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def jobs_sent(count):
    """The jobs on the jobs topic, read from its start without a consumer group."""
    consumer = Consumer({"bootstrap.servers": BROKER, "group.id": "test-clients-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition("receipt-jobs", partition, 0) for partition in range(TOPICS["receipt-jobs"])])
    jobs, deadline = [], time.monotonic() + 30
    while len(jobs) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            jobs.append((message.key().decode(), json.loads(message.value())))
    consumer.close()
    return jobs


def main():
    failures = []

    def check(what, ok, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'}  {what}" + ("" if ok else f": {detail}"))
        if not ok:
            failures.append(what)

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="receipt-worker-clients."))
    processes = []
    try:
        for topic, partitions in TOPICS.items():
            run(os.environ["TANSU_BIN"], "topic", "create", topic, "--partitions", partitions, "--broker",
                f"tcp://{BROKER}")
        sendjob, readresults = build_go(scratch)

        simulator = subprocess.Popen([BIN / "appstore-sim", "--port", "0"], stdout=subprocess.PIPE, text=True)
        processes.append(simulator)
        simulator_url = simulator.stdout.readline().strip().removeprefix("listening on ")
        (scratch / "root.pem").write_text(run(BIN / "appstore-sim", "--print-test-root"))
        metrics = free_port()
        (scratch / "worker.properties").write_text("\n".join([
            "apple.bundle_id=com.example", "apple.app_apple_id=1234567890", "apple.allow_insecure_urls=true",
            f"apple.verify_receipt.production_url={simulator_url}/production/verifyReceipt",
            f"apple.verify_receipt.sandbox_url={simulator_url}/sandbox/verifyReceipt",
            f"apple.api.production_url={simulator_url}/production", f"apple.api.sandbox_url={simulator_url}/sandbox",
            "apple.api.key_id=keyId", "apple.api.issuer_id=issuerId",
            f"apple.api.private_key_file={ROOT / 'Tests/AppleClientTests/testSigningKey.p8'}",
            f"apple.root_certificates={scratch / 'root.pem'}", f"ledger.url=sqlite:{scratch / 'ledger.sqlite'}",
            f"kafka.bootstrap.servers={BROKER}", f"metrics.listen=127.0.0.1:{metrics}",
            "kafka.session.timeout.ms=6000", "kafka.heartbeat.interval.ms=1000", "kafka.max.poll.interval.ms=10000",
        ]) + "\n")
        worker = subprocess.Popen([BIN / "receipt-worker", "run", "--config", scratch / "worker.properties"],
                                  stdout=open(scratch / "worker.log", "w"), stderr=subprocess.STDOUT)
        processes.append(worker)
        wait_for("the worker's /readyz", lambda: get(f"http://127.0.0.1:{metrics}/readyz")[0] == 200, 90)

        # The clients' settings: the broker; and, for the consumers, Tansu's short group timings (its first join
        # waits for max.poll.interval.ms).
        (scratch / "producer.properties").write_text(f"bootstrap.servers={BROKER}\n")
        (scratch / "consumer.properties").write_text(
            f"bootstrap.servers={BROKER}\nsession.timeout.ms=6000\nheartbeat.interval.ms=1000\n"
            "max.poll.interval.ms=10000\n")
        producer, consumer = scratch / "producer.properties", scratch / "consumer.properties"
        python = sys.executable
        first, second = purchase(simulator_url, "coins_100"), purchase(simulator_url, "gems_500")

        job_ids = [run(python, HERE / "send_job.py", producer, "py-order-1", "player-py", "coins_100",
                       first["signed_transaction"]).strip(),
                   run(sendjob, producer, "go-order-1", "player-go", "gems_500", second["signed_transaction"]).strip()]
        lines = run(python, HERE / "read_results.py", consumer, "test-python-grants", 2, timeout=120).splitlines()
        actions = {json.loads(line)["event"]["order_id"]: json.loads(line)["action"] for line in lines}
        check("read_results.py reads both grants and credits each once",
              actions == {"py-order-1": "credit 1 coins_100 to player-py",
                          "go-order-1": "credit 1 gems_500 to player-go"}, actions)

        job_ids.append(run(sendjob, producer, "go-order-replay", "player-go", "coins_100",
                           first["signed_transaction"]).strip())
        go_lines = run(readresults, consumer, "test-go-results", 3, timeout=120).splitlines()
        go_actions = {json.loads(line)["event"]["order_id"]: json.loads(line)["action"] for line in go_lines}
        check("the Go readresults reads the three events: two grants, the replay denied",
              go_actions == {"py-order-1": "credit 1 coins_100 to player-py",
                             "go-order-1": "credit 1 gems_500 to player-go",
                             "go-order-replay": "deny order go-order-replay: duplicate_transaction"}, go_actions)

        jobs = jobs_sent(3)
        job_schema = Draft7Validator(json.loads((SCHEMAS / "job.json").read_text()),
                                     format_checker=Draft7Validator.FORMAT_CHECKER)
        check("the producers' three jobs are on the jobs topic, keyed by their order, with the ids they printed",
              sorted(job["job_id"] for _, job in jobs) == sorted(job_ids)
              and all(key == job["order_id"] for key, job in jobs), jobs)
        for key, job in jobs:
            errors = [error.message for error in job_schema.iter_errors(job)]
            check(f"the job of order {key} is valid against job.json", not errors, errors)
        for line in lines + go_lines:
            event = json.loads(line)["event"]
            schema = json.loads((SCHEMAS / f"{event['type']}.json").read_text())
            errors = [error.message for error in Draft7Validator(
                strict(schema), format_checker=Draft7Validator.FORMAT_CHECKER).iter_errors(event)]
            check(f"the {event['type']} of order {event['order_id']} a consumer printed is valid against its schema",
                  not errors, errors)
    finally:
        for process in reversed(processes):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    if failures:
        print(f"{len(failures)} failed; the worker's log: {scratch / 'worker.log'}")
        return 1
    subprocess.run(["rm", "-rf", str(scratch)])
    print("the integration guide's Python and Go producers and consumers work through a real worker")
    return 0


if __name__ == "__main__":
    sys.exit(main())
