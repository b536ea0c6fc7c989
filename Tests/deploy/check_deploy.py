#!/usr/bin/python3
"""Checks what can be checked here of deploy/: manifests parse and agree with each other and with the
worker's configuration, the ConfigMap's properties pass `receipt-worker check-config`, the systemd unit
passes `systemd-analyze verify` without a warning, the alert rules and the dashboard are well formed, and
the Dockerfile builds librdkafka with the set-up's own script. (That the dashboard and the rules name only
metrics the worker exports is checked against a live /metrics by MetricsEndpointTests.)

    /usr/bin/python3 Tests/deploy/check_deploy.py --binary .build/debug/receipt-worker

Prints one line per check; exit 1 when any fails."""
import argparse, json, os, re, shutil, subprocess, sys, tempfile
import yaml

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
deploy = os.path.join(root, "deploy")
failures = []


def check(name, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + name + ("" if ok else f": {detail}"))
    if not ok:
        failures.append(name)


def properties(text):
    pairs = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value.strip()
    return pairs


def kubernetes(binary):
    folder = os.path.join(deploy, "kubernetes")
    documents = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".yaml"):
            with open(os.path.join(folder, name)) as f:
                try:
                    docs = [d for d in yaml.safe_load_all(f) if d]
                    check(f"kubernetes/{name} parses", True)
                except yaml.YAMLError as error:
                    check(f"kubernetes/{name} parses", False, error)
                    continue
            for d in docs:
                documents.setdefault(d.get("kind"), []).append(d)
    kustomization = documents["Kustomization"][0]
    check("kustomization lists existing files",
          all(os.path.exists(os.path.join(folder, r)) for r in kustomization["resources"]), kustomization["resources"])
    for kind in ["Deployment", "ConfigMap", "Service", "PodDisruptionBudget", "ScaledObject", "TriggerAuthentication"]:
        check(f"a {kind}", kind in documents)

    deployment = documents["Deployment"][0]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    config = properties(documents["ConfigMap"][0]["data"]["worker.properties"])

    # The grace period covers preStop, the drain, and closing (consumer close + producer flush, 10 s).
    drain = int(config.get("worker.drain_timeout_ms", "20000")) / 1000
    hook = container.get("lifecycle", {}).get("preStop", {})
    command = hook.get("exec", {}).get("command", [])
    pre_stop = hook.get("sleep", {}).get("seconds") or (int(command[1]) if command[:1] == ["sleep"] else 0)
    grace = pod["terminationGracePeriodSeconds"]
    check("terminationGracePeriodSeconds >= preStop + drain + 10 s to close",
          grace >= pre_stop + drain + 10, f"{grace} < {pre_stop} + {drain} + 10")

    port = int(config["metrics.listen"].rsplit(":", 1)[1])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    check("the metrics port is metrics.listen's", ports.get("metrics") == port, f"{ports} vs {port}")
    check("liveness on /healthz", container["livenessProbe"]["httpGet"]["path"] == "/healthz")
    check("readiness on /readyz", container["readinessProbe"]["httpGet"]["path"] == "/readyz")

    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    secret_dir = mounts["secrets"]
    secret_name = volumes["secrets"]["secret"]["secretName"]
    example = next(d for d in yaml.safe_load_all(open(os.path.join(folder, "secret-example.yaml"))) if d)
    files = [v for k, v in config.items() if k.endswith("_file")]
    check("every *_file key points into the mounted Secret", all(f.startswith(secret_dir + "/") for f in files), files)
    missing = [f for f in files if os.path.basename(f) not in example["stringData"]]
    check("secret-example.yaml has every key the config reads", not missing and example["metadata"]["name"] == secret_name, missing)
    check("the config file is mounted where args read it",
          any(a.startswith(mounts["config"]) for a in container["args"]) and volumes["config"]["configMap"]["name"]
          == documents["ConfigMap"][0]["metadata"]["name"])

    for kind in ["Service", "PodDisruptionBudget"]:
        spec = documents[kind][0]["spec"]
        selector = spec["selector"].get("matchLabels", spec["selector"])
        check(f"the {kind} selects the Deployment's pods", all(labels.get(k) == v for k, v in selector.items()), selector)
    scaled = documents["ScaledObject"][0]["spec"]
    trigger = scaled["triggers"][0]["metadata"]
    check("KEDA scales the Deployment", scaled["scaleTargetRef"]["name"] == deployment["metadata"]["name"])
    check("KEDA watches the workers' group and jobs topic",
          trigger["consumerGroup"] == config["kafka.group.id"] and trigger["topic"] == config.get("topics.jobs", "receipt-jobs"))
    check("KEDA's brokers are the workers'", trigger["bootstrapServers"] == config["kafka.bootstrap.servers"])

    # The ConfigMap's properties, validated by the worker itself, with the secret files stubbed.
    with tempfile.TemporaryDirectory() as stubs:
        # check-config builds the API key as run does: the stub is Apple's public test key.
        test_key = os.path.join(os.path.dirname(__file__), "..", "AppleClientTests", "testSigningKey.p8")
        stub_values = {"ledger.url_file": "postgresql://u:p@db/ledger\n",
                       "apple.api.private_key_file": open(test_key).read()}
        arguments = [binary, "check-config", "--config", os.path.join(stubs, "worker.properties")]
        text = documents["ConfigMap"][0]["data"]["worker.properties"]
        for key in [k for k in config if k.endswith("_file")]:
            stub = os.path.join(stubs, key)
            with open(stub, "w") as f:
                f.write(stub_values.get(key, "stub\n"))
            text = text.replace(f"{key}={config[key]}", f"{key}={stub}")
        with open(arguments[-1], "w") as f:
            f.write(text)
        run = subprocess.run(arguments, capture_output=True, text=True, env={"PATH": os.environ.get("PATH", "")})
        check("the ConfigMap passes receipt-worker check-config", run.returncode == 0, run.stderr.strip())


def systemd(binary):
    unit = os.path.join(deploy, "systemd", "receipt-worker.service")
    text = open(unit).read()
    if not shutil.which("systemd-analyze"):
        check("systemd-analyze is installed (scripts/setup.sh installs systemd)", False)
        return
    with tempfile.TemporaryDirectory() as folder:
        # verify checks that ExecStart exists: point it at the binary just built.
        copy = os.path.join(folder, "receipt-worker.service")
        with open(copy, "w") as f:
            f.write(text.replace("/usr/local/bin/receipt-worker", os.path.abspath(binary)))
        run = subprocess.run(["systemd-analyze", "verify", copy], capture_output=True, text=True)
        output = (run.stdout + run.stderr).strip()
        check("systemd-analyze verify passes without a warning", run.returncode == 0 and not output, output)
    timeout = int(re.search(r"^TimeoutStopSec=(\d+)", text, re.M).group(1))
    config = properties(open(os.path.join(root, "config", "worker.properties")).read())
    drain = int(config.get("worker.drain_timeout_ms", "20000")) / 1000
    check("TimeoutStopSec >= drain + 10 s to close", timeout >= drain + 10, f"{timeout}")
    check("a configuration error (exit 2) is not restarted", "RestartPreventExitStatus=2" in text)


def prometheus():
    path = os.path.join(deploy, "prometheus", "receipt-worker-rules.yaml")
    rules = yaml.safe_load(open(path))["groups"][0]["rules"]
    check("alert rules parse", len(rules) > 0)
    for rule in rules:
        expr = rule.get("expr", "")
        ok = (rule.get("alert") and expr and rule.get("labels", {}).get("severity") in ("critical", "warning", "info")
              and rule.get("annotations", {}).get("summary") and expr.count("(") == expr.count(")")
              and expr.count("{") == expr.count("}"))
        check(f"alert {rule.get('alert')} has expr, severity, summary, balanced brackets", bool(ok), rule)
    check("alert names are unique", len({r["alert"] for r in rules}) == len(rules))


def grafana():
    dashboard = json.load(open(os.path.join(deploy, "grafana", "receipt-worker-dashboard.json")))
    panels = dashboard["panels"]
    check("dashboard parses with panels", len(panels) > 0)
    check("panel ids are unique", len({p["id"] for p in panels}) == len(panels))
    empty = [p["title"] for p in panels if not p.get("targets") or not all(t.get("expr") for t in p["targets"])]
    check("every panel queries something", not empty, empty)
    unbalanced = [t["expr"] for p in panels for t in p["targets"] if t["expr"].count("(") != t["expr"].count(")")]
    check("every query has balanced brackets", not unbalanced, unbalanced)


def dockerfile():
    text = open(os.path.join(deploy, "Dockerfile")).read()
    stages = re.findall(r"^FROM\s+\S+(?:\s+AS\s+(\S+))?", text, re.M)
    check("the Dockerfile is multi-stage", len(stages) >= 2, stages)
    check("it builds librdkafka with the set-up's script", "scripts/build-librdkafka.sh" in text)
    sources = [s for line in re.findall(r"^COPY\s+(?!--from)(.+)$", text, re.M) for s in line.split()[:-1]]
    missing = [s for s in sources if not os.path.exists(os.path.join(root, s))]
    check("every COPY source exists", not missing, missing)
    check("it runs as a non-root user", re.search(r"^USER\s+(?!root|0\b)\S+", text, re.M) is not None)
    check("SIGTERM stops it (the graceful drain)", "STOPSIGNAL SIGTERM" in text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    binary = parser.parse_args().binary
    kubernetes(binary)
    systemd(binary)
    prometheus()
    grafana()
    dockerfile()
    print(f"{len(failures)} failed" if failures else "all deploy checks passed")
    sys.exit(1 if failures else 0)
