#!/usr/bin/python3
"""Checks what can be checked here of deploy/: the Kubernetes manifests are rendered as `kubectl kustomize`
does (Tests/deploy/kustomize_render.py, compared with kubectl where it is installed), every rendered object
is validated against the Kubernetes JSON schemas (kubernetes-validate) or, for KEDA's kinds, against
Tests/deploy/keda-schema.json, and the objects agree with each other, with deploy/README.md's topics and
with the worker's configuration; the ConfigMap's properties pass `receipt-worker check-config`, the systemd
unit passes `systemd-analyze verify` without a warning, the alert rules and the dashboard are well formed,
and the Dockerfile builds librdkafka with the set-up's own script. The example Ingress (ingress-example.yaml, not
in the kustomization) is validated on its own and must publish /notifications/apple of the notifications Service
over TLS. (That the dashboard and the rules name
only metrics the worker exports is checked against a live /metrics by MetricsEndpointTests.)

    .deps/venv/bin/python Tests/deploy/check_deploy.py --binary .build/debug/receipt-worker

(.deps/venv: scripts/setup.sh, from scripts/requirements-test.txt.) Prints one line per check (`skip` for
the comparison with kubectl when kubectl is not installed); exit 1 when any fails."""
import argparse, json, os, re, shutil, subprocess, sys, tempfile
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kustomize_render  # noqa: E402

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


# The Kubernetes versions the rendered objects are validated against (kubernetes-validate's schemas,
# strict: an unknown field fails): the oldest minor we still support, and the newest the package knows.
OLDEST_KUBERNETES = "1.27"
# Manifests deliberately left out of the kustomization: filled in and applied by hand (deploy/README.md).
EXAMPLES = ("secret-example.yaml", "ingress-example.yaml", "kafka-users-example.yaml")
NOTIFICATIONS_PATH = "/notifications/apple"


def secret_files(config):
    """The properties that name a file of the mounted Secret: every *_file key, and librdkafka's CA."""
    return {k: v for k, v in config.items() if k.endswith("_file") or k == "kafka.ssl.ca.location"}


def compare_with_kubectl(folder, rendered):
    kubectl = shutil.which("kubectl")
    if not kubectl:
        print("skip  the renderer agrees with kubectl kustomize: kubectl is not installed")
        return
    run = subprocess.run([kubectl, "kustomize", folder], capture_output=True, text=True)
    if run.returncode != 0:
        check("kubectl kustomize renders the kustomization", False, run.stderr.strip())
        return
    theirs = {kustomize_render.identity(d): d for d in yaml.safe_load_all(run.stdout) if d}
    mine = {kustomize_render.identity(d): d for d in rendered}
    different = sorted(str(k) for k in set(theirs) | set(mine) if theirs.get(k) != mine.get(k))
    check("the renderer's output equals kubectl kustomize's, object for object", not different, different)


def validate_schemas(rendered):
    try:
        import jsonschema, kubernetes_validate
    except ImportError as error:
        check("kubernetes-validate is installed (bash scripts/setup.sh; run with .deps/venv/bin/python)", False, error)
        return
    versions = [OLDEST_KUBERNETES, kubernetes_validate.utils.latest_version()]
    keda = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "keda-schema.json")))
    for resource in rendered:
        name = f"{resource['kind']} {resource['metadata']['name']}"
        if resource["apiVersion"].startswith("keda.sh/"):
            schema = dict(keda["kinds"].get(resource["kind"], {"not": {}}), **{"$defs": keda["$defs"]})
            errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
                      for e in jsonschema.Draft202012Validator(schema).iter_errors(resource)]
            check(f"{name} is valid for KEDA's {resource['kind']} (Tests/deploy/keda-schema.json)", not errors, errors)
            continue
        errors = []
        for version in versions:
            try:
                kubernetes_validate.validate(resource, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                errors.append(f"{version}: {'.'.join(map(str, e.path))}: {e.message}")
            except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as e:
                errors.append(f"{version}: {e.message}")
        check(f"{name} is valid for Kubernetes {' and '.join(versions)} (strict schema)", not errors, errors)


def readme_topics():
    """The topics deploy/README.md creates: {name: {option: value}} from its kafka-topics.sh --create lines."""
    text = open(os.path.join(deploy, "README.md")).read().replace("\\\n", " ")
    topics = {}
    for line in text.splitlines():
        if "kafka-topics.sh" in line and "--create" in line:
            options = dict(re.findall(r"--(topic|partitions|replication-factor)[ =](\S+)", line))
            configs = dict(c.split("=", 1) for c in re.findall(r"--config[ =](\S+=\S+)", line))
            topics[options.get("topic")] = {**options, **configs}
    return topics


def kubernetes(binary):
    folder = os.path.join(deploy, "kubernetes")
    sources = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".yaml"):
            with open(os.path.join(folder, name)) as f:
                try:
                    sources[name] = [d for d in yaml.safe_load_all(f) if d]
                    check(f"kubernetes/{name} parses", True)
                except yaml.YAMLError as error:
                    check(f"kubernetes/{name} parses", False, error)
    kustomization = sources["kustomization.yaml"][0]
    listed = kustomization["resources"]
    check("kustomization lists existing files", all(os.path.exists(os.path.join(folder, r)) for r in listed), listed)
    unlisted = [n for n in sources if n not in listed and n not in ("kustomization.yaml", *EXAMPLES)]
    check("every manifest is in the kustomization", not unlisted, unlisted)
    check("secret-example.yaml is not applied (it would overwrite the real Secrets)", "secret-example.yaml" not in listed)
    check("ingress-example.yaml is not applied (its host, TLS Secret and class are placeholders)",
          "ingress-example.yaml" not in listed)
    check("the ConfigMap is generated from worker.properties (a change gives a new name and rolls the pods)",
          any("worker.properties" in g.get("files", []) for g in kustomization.get("configMapGenerator", [])))

    # Everything below is checked on the objects as `kubectl apply -k` would send them.
    try:
        rendered = kustomize_render.render(folder)
        check("the kustomization renders (Tests/deploy/kustomize_render.py)", True)
    except (kustomize_render.RenderError, OSError, yaml.YAMLError) as error:
        check("the kustomization renders (Tests/deploy/kustomize_render.py)", False, error)
        return
    compare_with_kubectl(folder, rendered)
    ingresses = [d for d in sources.get("ingress-example.yaml", []) if d.get("kind") == "Ingress"]
    validate_schemas(rendered + ingresses)
    documents = {}
    for d in rendered:
        documents.setdefault(d.get("kind"), []).append(d)
    for kind in ["Namespace", "ServiceAccount", "Deployment", "ConfigMap", "Service", "PodDisruptionBudget",
                 "NetworkPolicy", "ScaledObject", "TriggerAuthentication"]:
        check(f"a {kind}", kind in documents)

    namespace = kustomization["namespace"]
    check("a Namespace manifest creates the kustomization's namespace",
          [n["metadata"]["name"] for n in documents.get("Namespace", [])] == [namespace])
    outside = [f"{d['kind']}/{d['metadata']['name']}" for d in rendered
               if d["kind"] != "Namespace" and d["metadata"].get("namespace") != namespace]
    check(f"every other object is in the namespace {namespace}", not outside, outside)

    deployments = {d["metadata"]["name"]: d for d in documents["Deployment"]}
    deployment = deployments["receipt-worker"]
    receiver_deployment = deployments.get("receipt-worker-receiver")
    check("a Deployment of the receiver role (receipt-worker receive)", receiver_deployment is not None and
          receiver_deployment["spec"]["template"]["spec"]["containers"][0]["args"][0] == "receive")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    config_map = next(d for d in documents["ConfigMap"] if "worker.properties" in d.get("data", {}))
    config = properties(config_map["data"]["worker.properties"])
    check("the Deployment has no replicas (KEDA owns the count; apply -k would reset it)",
          "replicas" not in deployment["spec"], deployment["spec"].get("replicas"))

    # The generated ConfigMap: named with the hash of its content, and a change of content renames it.
    base = kustomization["configMapGenerator"][0]["name"]
    suffix = kustomize_render.content_hash(config_map)
    check("the ConfigMap's name carries the hash of its content",
          config_map["metadata"]["name"] == f"{base}-{suffix}", config_map["metadata"]["name"])
    with tempfile.TemporaryDirectory() as copy:
        changed = os.path.join(copy, "kubernetes")
        shutil.copytree(folder, changed)
        with open(os.path.join(changed, "worker.properties"), "a") as f:
            f.write("worker.max_in_flight=999\n")
        template = next(d for d in kustomize_render.render(changed) if d["kind"] == "Deployment"
                        and d["metadata"]["name"] == "receipt-worker")["spec"]["template"]
        check("a change of worker.properties changes the pod template (the replicas roll)",
              template != deployment["spec"]["template"])

    # The image: a placeholder in deployment.yaml, set by kustomize's images transformer.
    source_image = next(d for d in sources["deployment.yaml"] if d["kind"] == "Deployment")[
        "spec"]["template"]["spec"]["containers"][0]["image"]
    images = {i["name"]: i for i in kustomization.get("images", [])}
    check("deployment.yaml's image is a placeholder that kustomization.yaml's images: sets",
          source_image in images and container["image"] != source_image and "/" in container["image"],
          f"{source_image} -> {container['image']}")

    # The service account: the worker never calls the API, so no token is mounted.
    account = documents["ServiceAccount"][0]
    check("the pods run as the ServiceAccount, which mounts no API token",
          pod.get("serviceAccountName") == account["metadata"]["name"]
          and account.get("automountServiceAccountToken") is False
          and pod.get("automountServiceAccountToken") is not True)

    # No service links: Kubernetes would inject RECEIPT_WORKER_PORT=tcp://... and the like for the Service of that
    # name (the worker ignores RECEIPT_WORKER_* variables without "__", but none are wanted).
    check("the pods get no service-link environment variables (enableServiceLinks: false)",
          pod.get("enableServiceLinks") is False, pod.get("enableServiceLinks"))

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
    examples = {d["metadata"]["name"]: d for d in sources["secret-example.yaml"]}
    example = examples.get(secret_name, {"stringData": {}, "metadata": {"name": None}})
    files = secret_files(config)
    check("every secret file of the config is in the mounted Secret", all(
        f.startswith(secret_dir + "/") for f in files.values()), files)
    missing = [f for f in files.values() if os.path.basename(f) not in example["stringData"]]
    check("secret-example.yaml has every key the config reads", not missing and secret_name in examples, missing)
    check("the config file is mounted where args read it",
          any(a.startswith(mounts["config"]) for a in container["args"]) and volumes["config"]["configMap"]["name"]
          == config_map["metadata"]["name"])

    # Each Service, PodDisruptionBudget and NetworkPolicy selects the pods of exactly one Deployment: the workers'
    # (metrics, PDB, policy) or the receiver's (notifications Service, its PDB and policy).
    templates = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in deployments.items()}
    for resource in documents["Service"] + documents["PodDisruptionBudget"] + documents["NetworkPolicy"]:
        spec = resource["spec"]
        selector = (spec.get("podSelector") or spec["selector"]).get("matchLabels", spec.get("selector"))
        owners = [n for n, l in templates.items() if selector and all(l.get(k) == v for k, v in selector.items())]
        check(f"the {resource['kind']} {resource['metadata']['name']} selects the pods of one Deployment",
              len(owners) == 1, f"{selector} -> {owners}")
    for name, d in deployments.items():
        spread = d["spec"]["template"]["spec"].get("topologySpreadConstraints", [])
        check(f"the Deployment {name} spreads its replicas over nodes",
              any(c.get("topologyKey") == "kubernetes.io/hostname" and c.get("whenUnsatisfiable") == "DoNotSchedule"
                  for c in spread), spread)
    for name, d in deployments.items():
        spread = d["spec"]["template"]["spec"].get("topologySpreadConstraints", [])
        check(f"the Deployment {name} spreads its replicas over zones, hard",
              any(c.get("topologyKey") == "topology.kubernetes.io/zone" and c.get("whenUnsatisfiable") == "DoNotSchedule"
                  for c in spread), spread)
    startup = container.get("startupProbe", {})
    check("the workers' startup probe is /startupz, and waits at least 15 minutes (a migration Job's)",
          startup.get("httpGet", {}).get("path") == "/startupz"
          and startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3) >= 900, startup)
    check("the workers set client.rack from their zone (KIP-392)",
          any(e["name"] == "RECEIPT_WORKER_KAFKA__CLIENT__RACK" for e in container.get("env", [])))
    for pdb in documents["PodDisruptionBudget"]:
        check(f"the PodDisruptionBudget {pdb['metadata']['name']} lets drains evict unready pods",
              pdb["spec"].get("unhealthyPodEvictionPolicy") == "AlwaysAllow")
    # The worker's memory request covers the peak measured by scripts/bench-memory.sh (docs/benchmarks.md).
    request = container["resources"]["requests"]["memory"]
    check("the worker's memory request covers the measured peak (303 MiB)",
          request.endswith("Mi") and int(request[:-2]) >= 303, request)
    # PostgreSQL connections at the most replicas KEDA may start: under the server's default 100.
    pool = int(config.get("ledger.pool_size", "16"))
    most = documents["ScaledObject"][0]["spec"]["maxReplicaCount"]
    check("maxReplicaCount x ledger.pool_size stays under PostgreSQL's default 100 connections (with room)",
          most * pool <= 90, f"{most} x {pool}")
    check("KEDA's comments claim no zero-only setting (cooldownPeriod, activationLagThreshold with a minimum)",
          documents["ScaledObject"][0]["spec"].get("minReplicaCount", 0) == 0 or (
              "cooldownPeriod" not in documents["ScaledObject"][0]["spec"]
              and "activationLagThreshold" not in documents["ScaledObject"][0]["spec"]["triggers"][0]["metadata"]))

    # The notification receiver: its container port, the Service, the Ingress (example) and its NetworkPolicy
    # agree with the notifications.listen the receiver's args set.
    receiver_container = receiver_deployment["spec"]["template"]["spec"]["containers"][0] if receiver_deployment else {}
    receiver_args = receiver_container.get("args", [])
    receiver_maps = [d for d in documents["ConfigMap"] if "receiver.properties" in d.get("data", {})]
    receiver_config = properties(receiver_maps[0]["data"]["receiver.properties"]) if receiver_maps else {}
    listen = receiver_config.get("notifications.listen")
    check("receiver.properties sets notifications.listen (the workers' ConfigMap does not)",
          listen is not None and "notifications.listen" not in config, listen)
    ports = {p["name"]: p["containerPort"] for p in receiver_container.get("ports", [])} or ports
    if listen:
        check("the notifications port is notifications.listen's",
              ports.get("notifications") == int(listen.rsplit(":", 1)[1]), f"{ports} vs {listen}")
        check("apple.app_apple_id is set (required with notifications.listen)", bool(config.get("apple.app_apple_id")))
        services = {s["metadata"]["name"]: s for s in documents["Service"]}
        receiver = services.get("receipt-worker-notifications", {}).get("spec", {})
        service_ports = {p.get("name"): p for p in receiver.get("ports", [])}
        check("the Service receipt-worker-notifications (ClusterIP) forwards to the port notifications",
              receiver.get("type", "ClusterIP") == "ClusterIP" and receiver.get("clusterIP") != "None"
              and any(p.get("targetPort") in ("notifications", ports.get("notifications")) for p in service_ports.values()),
              receiver)
        receiver_policy = next(p for p in documents["NetworkPolicy"]
                               if p["metadata"]["name"] == "receipt-worker-receiver")
        ingress_ports = [p["port"] for r in receiver_policy["spec"].get("ingress", []) for p in r.get("ports", [])]
        check("the receiver's NetworkPolicy admits the notifications port (from the ingress controller)",
              "notifications" in ingress_ports or ports.get("notifications") in ingress_ports, ingress_ports)
        check("ingress-example.yaml has an Ingress", len(ingresses) == 1, len(ingresses))
        for ingress in ingresses:
            spec = ingress["spec"]
            check("the example Ingress is in the namespace", ingress["metadata"].get("namespace") == namespace)
            routes = [(rule.get("host"), path) for rule in spec.get("rules", [])
                      for path in rule.get("http", {}).get("paths", [])]
            good = [(host, path) for host, path in routes if path.get("path") == NOTIFICATIONS_PATH
                    and path["backend"]["service"]["name"] == "receipt-worker-notifications"
                    and (path["backend"]["service"]["port"].get("name") in service_ports
                         or path["backend"]["service"]["port"].get("number") in
                         [p.get("port") for p in service_ports.values()])]
            check(f"the example Ingress routes {NOTIFICATIONS_PATH} to the notifications Service, and nothing else",
                  good and len(good) == len(routes), routes)
            tls_hosts = {h for entry in spec.get("tls", []) for h in entry.get("hosts", [])}
            check("the example Ingress serves its host over TLS (Apple requires HTTPS)",
                  good and all(host in tls_hosts for host, _ in good), f"{tls_hosts} vs {[h for h, _ in good]}")

    # The workers' NetworkPolicy: the pods' traffic and no more.
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    policy = next(p for p in documents["NetworkPolicy"] if p["metadata"]["name"] == "receipt-worker")["spec"]
    check("it restricts both directions", sorted(policy.get("policyTypes", [])) == ["Egress", "Ingress"])
    allowed = {(p.get("protocol", "TCP"), p["port"]) for rule in policy.get("egress", []) for p in rule.get("ports", [])}
    kafka_ports = {int(s.rsplit(":", 1)[1]) for s in config["kafka.bootstrap.servers"].split(",")}
    needed = {("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 5432), ("TCP", 9092), ("TCP", 9093), ("TCP", 9094),
              ("TCP", 9096), ("TCP", 9098)}
    needed |= {("TCP", p) for p in kafka_ports}
    check("egress allows DNS, Apple (443), Kafka (the brokers' ports) and PostgreSQL (5432)",
          needed <= allowed, sorted(needed - allowed))
    check("every egress rule names its ports", all(rule.get("ports") for rule in policy.get("egress", [])))
    ingress = policy.get("ingress", [])
    open_rules = [r for r in ingress if not r.get("from") or not r.get("ports")]
    check("every ingress rule names its sources and ports (nothing open to all)", not open_rules, open_rules)
    unknown = [p["port"] for r in ingress for p in r["ports"] if p["port"] not in ports and p["port"] not in ports.values()]
    check("ingress reaches only ports the container has", not unknown, unknown)
    check("the metrics port is reachable (by Prometheus)",
          any(p["port"] in ("metrics", port) for r in ingress for p in r["ports"]))

    scaled = documents["ScaledObject"][0]["spec"]
    trigger = scaled["triggers"][0]["metadata"]
    check("KEDA scales the Deployment", scaled["scaleTargetRef"]["name"] == deployment["metadata"]["name"])
    check("KEDA watches the workers' group and jobs topic",
          trigger["consumerGroup"] == config["kafka.group.id"] and trigger["topic"] == config.get("topics.jobs", "receipt-jobs"))
    check("KEDA's brokers are the workers'", trigger["bootstrapServers"] == config["kafka.bootstrap.servers"])

    # KEDA's credentials: every key the TriggerAuthentication reads exists in the example Secrets, and
    # says what the worker's configuration says.
    refs = documents["TriggerAuthentication"][0]["spec"]["secretTargetRef"]
    absent = [f"{r['name']}/{r['key']}" for r in refs if r["key"] not in examples.get(r["name"], {}).get("stringData", {})]
    check("secret-example.yaml has every key KEDA's TriggerAuthentication reads", not absent, absent)
    keda = {r["parameter"]: examples.get(r["name"], {}).get("stringData", {}).get(r["key"]) for r in refs}
    mechanism = config.get("kafka.sasl.mechanisms", "")
    protocol = config.get("kafka.security.protocol", "PLAINTEXT")
    sasl = {"SCRAM-SHA-512": "scram_sha512", "SCRAM-SHA-256": "scram_sha256", "PLAIN": "plaintext"}.get(mechanism, "none")
    check("KEDA's sasl and tls agree with the worker's kafka.* settings",
          keda.get("sasl", "none") == (sasl if protocol.startswith("SASL") else "none")
          and keda.get("tls", "disable") == ("enable" if protocol in ("SSL", "SASL_SSL") else "disable"),
          {k: keda.get(k) for k in ("sasl", "tls")})
    # Least privilege: KEDA has a Kafka user of its own and reads nothing of the workers' Secret.
    check("KEDA uses a Kafka user of its own, not the workers'",
          protocol == "PLAINTEXT" or (keda.get("username") and keda.get("username") != config.get("kafka.sasl.username")),
          keda.get("username"))
    check("KEDA's TriggerAuthentication reads nothing of the workers' Secret",
          all(r["name"] != secret_name for r in refs), [r["name"] for r in refs])
    by_parameter = {r["parameter"]: r for r in refs}
    ca = config.get("kafka.ssl.ca.location")
    check("KEDA trusts a brokers' CA when the worker does",
          (ca is None) == ("ca" not in by_parameter), f"{ca} vs {by_parameter.get('ca')}")

    # The topics: deploy/README.md creates each one the worker checks at start, the jobs topic with a
    # partition for every replica KEDA may start (a replica without one idles).
    topics = readme_topics()
    names = [config.get("topics.jobs", "receipt-jobs"), config.get("topics.results", "receipt-results"),
             config.get("topics.dlq", "receipt-dlq"), config.get("topics.notifications", "receipt-notifications"),
             config.get("topics.consumption", "receipt-consumption")]
    check("deploy/README.md creates the jobs, results, DLQ, notifications and consumption topics",
          all(n in topics for n in names), f"{names} vs {sorted(topics)}")
    jobs_partitions = int(topics.get(names[0], {}).get("partitions", 0))
    check("KEDA's maxReplicaCount is the jobs topic's partition count (a replica more would idle, fewer would cap the fleet below it)",
          jobs_partitions == scaled["maxReplicaCount"], f"{jobs_partitions} != {scaled['maxReplicaCount']}")
    check("KEDA leaves persistent lag out (a slow Apple holds commits: no reason to scale out)",
          trigger.get("excludePersistentLag") == "true", trigger.get("excludePersistentLag"))
    check("every topic is replicated (factor 3, min.insync.replicas 2)", all(
        topics.get(n, {}).get("replication-factor") == "3" and topics.get(n, {}).get("min.insync.replicas") == "2"
        for n in names), {n: topics.get(n) for n in names})

    receiver_checks(documents, sources, config, examples, binary)

    # The ConfigMap's properties, validated by the worker itself, with the secret files stubbed.
    with tempfile.TemporaryDirectory() as stubs:
        # check-config builds the API key as run does: the stub is Apple's public test key.
        test_key = os.path.join(os.path.dirname(__file__), "..", "AppleClientTests", "testSigningKey.p8")
        stub_values = {"ledger.url_file": "postgresql://u:p@db/ledger\n",
                       "apple.api.private_key_file": open(test_key).read()}
        arguments = [binary, "check-config", "--config", os.path.join(stubs, "worker.properties")]
        text = config_map["data"]["worker.properties"]
        for key, path in files.items():
            stub = os.path.join(stubs, key)
            with open(stub, "w") as f:
                f.write(stub_values.get(key, "stub\n"))
            text = text.replace(f"{key}={path}", f"{key}={stub}")
        with open(arguments[-1], "w") as f:
            f.write(text)
        run = subprocess.run(arguments, capture_output=True, text=True, env={"PATH": os.environ.get("PATH", "")})
        check("the ConfigMap passes receipt-worker check-config", run.returncode == 0, run.stderr.strip())


def receiver_checks(documents, sources, worker_config, examples, binary):
    """The receiver faces the internet: it mounts its own ConfigMap and Secret and nothing else, neither holds
    what grants (the App Store Connect key, a shared secret, the ledger), and its Kafka user is not the workers'."""
    deployment = next(d for d in documents["Deployment"] if d["metadata"]["name"] == "receipt-worker-receiver")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    config_maps = {d["metadata"]["name"]: d for d in documents["ConfigMap"]}
    receiver_map = next((d for n, d in config_maps.items() if "receiver.properties" in d.get("data", {})), None)
    check("a ConfigMap of the receivers' own (receiver.properties)", receiver_map is not None)
    if receiver_map is None:
        return
    config = properties(receiver_map["data"]["receiver.properties"])
    secrets = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
    projected = [s.get("secret", {}).get("name") for v in pod["volumes"] for s in v.get("projected", {}).get("sources", [])]
    from_env = [e["valueFrom"]["secretKeyRef"]["name"] for c in pod["containers"] for e in c.get("env", [])
                if "secretKeyRef" in e.get("valueFrom", {})]
    from_env += [e["secretRef"]["name"] for c in pod["containers"] for e in c.get("envFrom", []) if "secretRef" in e]
    mounted = set(secrets + projected + from_env)
    check("the receiver mounts one Secret, receipt-worker-receiver, and no other", mounted == {"receipt-worker-receiver"},
          sorted(mounted))
    maps = {v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
    check("the receiver mounts only its own ConfigMap", maps == {receiver_map["metadata"]["name"]}, sorted(maps))
    granting = [k for k in config if k.startswith(("ledger.", "apple.api.private_key", "apple.shared_secret"))
                or k.startswith("apps.") and ("shared_secret" in k or "private_key" in k)]
    check("receiver.properties names no ledger, no App Store Connect key, no shared secret", not granting, granting)
    example = examples.get("receipt-worker-receiver", {}).get("stringData", {})
    check("the receivers' example Secret holds only the Kafka password and the brokers' CA",
          example and set(example) <= {"kafka-password", "kafka-ca.crt"}, sorted(example))
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == next(
        v["name"] for v in pod["volumes"] if "secret" in v))
    files = secret_files(config)
    check("every secret file of receiver.properties is in its mounted Secret",
          all(f.startswith(mount + "/") and os.path.basename(f) in example for f in files.values()), files)
    check("the receivers' Kafka user is not the workers'",
          config.get("kafka.sasl.username") != worker_config.get("kafka.sasl.username"), config.get("kafka.sasl.username"))
    for key in ("apple.bundle_id", "apple.app_apple_id", "apple.allow_sandbox", "topics.notifications",
                "kafka.bootstrap.servers", "kafka.security.protocol"):
        check(f"receiver.properties agrees with worker.properties on {key}", config.get(key) == worker_config.get(key),
              f"{config.get(key)} vs {worker_config.get(key)}")
    check("the receiver's args read receiver.properties", any(a.endswith("receiver.properties") for a in container["args"]))
    with tempfile.TemporaryDirectory() as stubs:
        text = receiver_map["data"]["receiver.properties"]
        for key, path in files.items():
            stub = os.path.join(stubs, key)
            with open(stub, "w") as f:
                f.write("stub\n")
            text = text.replace(f"{key}={path}", f"{key}={stub}")
        with open(os.path.join(stubs, "receiver.properties"), "w") as f:
            f.write(text)
        run = subprocess.run([binary, "check-config", "--config", os.path.join(stubs, "receiver.properties")],
                             capture_output=True, text=True, env={"PATH": os.environ.get("PATH", "")})
        check("receiver.properties passes receipt-worker check-config", run.returncode == 0, run.stderr.strip())
    # Users as a Strimzi example: the receiver's may write the notifications topic and nothing else.
    users = {d["metadata"]["name"]: d for d in sources.get("kafka-users-example.yaml", [])}
    receiver_acls = users.get(config.get("kafka.sasl.username"), {}).get("spec", {}).get("authorization", {}).get("acls", [])
    writes = {a["resource"].get("name") for a in receiver_acls if "Write" in a["operations"] or "Read" in a["operations"]}
    check("kafka-users-example.yaml: the receivers' user may write the notifications topic and read or write nothing else",
          writes == {config.get("topics.notifications")}, sorted(w or "" for w in writes))
    keda = users.get("receipt-worker-keda", {}).get("spec", {}).get("authorization", {}).get("acls", [])
    check("kafka-users-example.yaml: KEDA's user may only describe",
          keda and all(a["operations"] == ["Describe"] for a in keda), keda)


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
        run = subprocess.run(["systemd-analyze", "security", "--offline=yes", copy], capture_output=True, text=True)
        level = re.search(r"Overall exposure level for \S+: ([0-9.]+)", run.stdout + run.stderr)
        check("systemd-analyze security rates the unit 2.0 or better", level is not None and float(level.group(1)) <= 2.0,
              level.group(0) if level else (run.stdout + run.stderr)[-300:])
    credentials = re.findall(r"^LoadCredential=([^:]+):", text, re.M)
    for secret in ("apple-shared-secret", "apple-api-key.p8", "kafka-password", "ledger-url"):
        check(f"the unit passes {secret} as a credential", secret in credentials, credentials)
    timeout = int(re.search(r"^TimeoutStopSec=(\d+)", text, re.M).group(1))
    config = properties(open(os.path.join(root, "config", "worker.properties")).read())
    drain = int(config.get("worker.drain_timeout_ms", "20000")) / 1000
    check("TimeoutStopSec >= drain + 10 s to close", timeout >= drain + 10, f"{timeout}")
    check("a configuration error (exit 2) is not restarted", "RestartPreventExitStatus=2" in text)


def prometheus():
    folder = os.path.join(deploy, "prometheus")
    path = os.path.join(folder, "receipt-worker-rules.yaml")
    groups = yaml.safe_load(open(path))["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    check("alert rules parse", len(rules) > 0)
    runbook = open(os.path.join(root, "docs", "runbook.md")).read()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^#+ (.+)$", runbook, re.M)}
    for rule in rules:
        expr = rule.get("expr", "")
        ok = (rule.get("alert") and expr and rule.get("labels", {}).get("severity") in ("critical", "warning", "info")
              and rule.get("annotations", {}).get("summary") and expr.count("(") == expr.count(")")
              and expr.count("{") == expr.count("}"))
        check(f"alert {rule.get('alert')} has expr, severity, summary, balanced brackets", bool(ok), rule)
        check(f"alert {rule.get('alert')} waits (for:) before it fires", bool(rule.get("for")), rule)
        url = rule.get("annotations", {}).get("runbook_url", "")
        anchor = url.partition("#")[2]
        check(f"alert {rule.get('alert')} has a runbook_url into docs/runbook.md",
              url.startswith("https://") and "docs/runbook.md#" in url and anchor in anchors, url)
    check("alert names are unique", len({r["alert"] for r in rules}) == len(rules))
    if not shutil.which("promtool"):
        check("promtool is installed (scripts/setup.sh installs Debian's prometheus)", False)
        return
    run = subprocess.run(["promtool", "check", "rules", path], capture_output=True, text=True)
    check("promtool check rules passes", run.returncode == 0, (run.stdout + run.stderr)[-500:])
    tests = os.path.join(folder, "receipt-worker-rules.test.yaml")
    run = subprocess.run(["promtool", "test", "rules", os.path.basename(tests)], capture_output=True, text=True,
                         cwd=folder)
    check("promtool test rules passes", run.returncode == 0, (run.stdout + run.stderr)[-1500:])
    tested = {case["alertname"] for test in yaml.safe_load(open(tests))["tests"]
              for case in test.get("alert_rule_test", []) if case.get("exp_alerts")}
    untested = sorted({r["alert"] for r in rules} - tested)
    check("every alert has a promtool test in which it fires", not untested, untested)


def prometheus_rule_document():
    """deploy/kubernetes/monitoring/prometheusrule.yaml as it must be: the rules file's groups, unchanged."""
    groups = yaml.safe_load(open(os.path.join(deploy, "prometheus", "receipt-worker-rules.yaml")))["groups"]
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "receipt-worker",
                         "labels": {"app.kubernetes.io/name": "receipt-worker", "release": "kube-prometheus-stack"}},
            "spec": {"groups": groups}}


PROMETHEUS_RULE_HEADER = ("# GENERATED from deploy/prometheus/receipt-worker-rules.yaml by Tests/deploy/check_deploy.py "
                          "--write-monitoring:\n# edit the rules file, then run it. The same alerts for the Prometheus "
                          "Operator.\n")


def monitoring(write=False):
    folder = os.path.join(deploy, "kubernetes", "monitoring")
    path = os.path.join(folder, "prometheusrule.yaml")
    expected = prometheus_rule_document()
    if write:
        with open(path, "w") as f:
            f.write(PROMETHEUS_RULE_HEADER + yaml.safe_dump(expected, sort_keys=False, width=120, allow_unicode=True))
    found = yaml.safe_load(open(path)) if os.path.exists(path) else None
    check("monitoring/prometheusrule.yaml carries exactly the alert rules (--write-monitoring rewrites it)",
          found == expected)
    kustomization = yaml.safe_load(open(os.path.join(folder, "kustomization.yaml")))
    documents = [d for name in kustomization["resources"] for d in yaml.safe_load_all(open(os.path.join(folder, name)))]
    kinds = sorted(d["kind"] for d in documents)
    check("monitoring/ has a ServiceMonitor, a PodMonitor and the PrometheusRule",
          kinds == ["PodMonitor", "PrometheusRule", "ServiceMonitor"], kinds)
    # The runbook's address is a setting of the kustomization: rendered, every alert's link is that base.
    monitored = kustomize_render.render(folder)
    settings = next(d for d in monitored if d["kind"] == "ConfigMap" and "runbook_base" in d.get("data", {}))
    base = settings["data"]["runbook_base"]
    links = [r["annotations"]["runbook_url"] for d in monitored if d["kind"] == "PrometheusRule"
             for g in d["spec"]["groups"] for r in g["rules"] if "alert" in r]
    check("rendered, every runbook_url is the kustomization's runbook_base and the alert's section",
          links and all(link.startswith(base + "#receiptworker") for link in links),
          [link for link in links if not link.startswith(base + "#")][:3])
    rendered = kustomize_render.render(os.path.join(deploy, "kubernetes"))
    services = {d["metadata"]["name"]: d for d in rendered if d["kind"] == "Service"}
    templates = [d["spec"]["template"]["metadata"]["labels"] for d in rendered if d["kind"] == "Deployment"]
    for d in documents:
        selector = d.get("spec", {}).get("selector", {}).get("matchLabels")
        if d["kind"] == "ServiceMonitor":
            target = [s for s in services.values() if all(s["metadata"].get("labels", {}).get(k) == v
                                                          for k, v in selector.items())]
            check("the ServiceMonitor selects the metrics Service and scrapes its port",
                  len(target) == 1 and d["spec"]["endpoints"][0]["port"] in
                  [p["name"] for p in target[0]["spec"]["ports"]], target and target[0]["metadata"]["name"])
        if d["kind"] == "PodMonitor":
            check("the PodMonitor selects the receiver's pods",
                  any(all(t.get(k) == v for k, v in selector.items()) and t.get("app.kubernetes.io/component") == "receiver"
                      for t in templates), selector)


def grafana():
    dashboard = json.load(open(os.path.join(deploy, "grafana", "receipt-worker-dashboard.json")))
    panels = dashboard["panels"]
    check("dashboard parses with panels", len(panels) > 0)
    check("panel ids are unique", len({p["id"] for p in panels}) == len(panels))
    empty = [p["title"] for p in panels if not p.get("targets") or not all(t.get("expr") for t in p["targets"])]
    check("every panel queries something", not empty, empty)
    unbalanced = [t["expr"] for p in panels for t in p["targets"] if t["expr"].count("(") != t["expr"].count(")")]
    check("every query has balanced brackets", not unbalanced, unbalanced)
    # Every query parses as PromQL: promtool checks them as recording rules, Grafana's variables replaced by
    # what Grafana sends (a multi-value variable as a regex alternation). The metrics they name are checked
    # against a live /metrics by MetricsEndpointTests.
    variables = {"$__rate_interval": "5m", "$__interval": "1m", "$job": "receipt-worker", "$app": "default|puzzle"}
    def substituted(expr):
        for name, value in variables.items():
            expr = expr.replace(name, value)
        return expr
    group = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:panel_{p['id']}_{i}", "expr": substituted(t["expr"])}
        for p in panels for i, t in enumerate(p["targets"])]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(group, f)
        f.flush()
        run = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
    check("every panel's query parses as PromQL (promtool)", run.returncode == 0, (run.stdout + run.stderr)[-800:])
    variable_names = {v["name"] for v in dashboard.get("templating", {}).get("list", [])}
    check("the dashboard can be read per game (an app variable, used by the per-game panels)",
          "app" in variable_names and sum('$app' in t["expr"] for p in panels for t in p["targets"]) >= 8)
    # rate() and increase() apply to counters and histograms, never to a gauge.
    gauges = ("receipt_worker_partition_committed_offset", "receipt_worker_partition_lag", "receipt_worker_ready",
              "receipt_worker_jobs_in_flight", "receipt_worker_ledger_pool_connections")
    misapplied = [t["expr"] for p in panels for t in p["targets"]
                  if re.search(r"(rate|increase)\(\s*(" + "|".join(gauges) + r")\b", t["expr"])]
    check("no panel applies rate() or increase() to a gauge", not misapplied, misapplied)


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
    parser.add_argument("--write-monitoring", action="store_true",
                        help="rewrite deploy/kubernetes/monitoring/prometheusrule.yaml from the rules file")
    arguments = parser.parse_args()
    binary = arguments.binary
    kubernetes(binary)
    systemd(binary)
    prometheus()
    monitoring(write=arguments.write_monitoring)
    grafana()
    dockerfile()
    print(f"{len(failures)} failed" if failures else "all deploy checks passed")
    sys.exit(1 if failures else 0)
