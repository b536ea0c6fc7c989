#!/usr/bin/python3
"""Checks what can be checked here of deploy/. The Kubernetes manifests are rendered with `kubectl kustomize` in
every combination (COMBINATIONS: the base, each component, all of them, App Review's overlay alone and with
components), and each combination is checked: the documented secret step (deploy/kubernetes/create-secrets.sh DIR
KUSTOMIZATION, on stub files named as deploy/README.md lists them) is run offline, and every Secret and key a
workload's configuration, volumes or environment, or KEDA's TriggerAuthentication, names must be one it creates,
with no workload mounting a key it never reads; each role's configuration passes `receipt-worker check-config` with
exactly its mounted files present; the migrate Job grants what docs/deployment.md lists; no disruption budget
selects a Job; every object (the rendered ones, the Secrets, the monitoring kustomization's, the examples) is
validated against the Kubernetes JSON schemas (kubernetes-validate) or, for KEDA's, the Prometheus Operator's and
the Gateway API's kinds, against their CRDs vendored in Tests/deploy/crds/; the objects agree with each other, with
deploy/README.md's topics and with the configuration; every pod mounts no API token and carries the deployment's
labels; zone spreading is preferred, and required with components/multi-zone. checkov's Kubernetes policies run on
every combination (.deps/checkov), each finding printed under its combination, the exceptions (with their reasons)
in Tests/deploy/checkov-exceptions.yaml. The kubectl commands of docs/runbook.md and deploy/README.md are checked
against the manifests (workloads, ports, selectors, the image's tools, KEDA's replicas). The release named by
BuildInfo.version, the image tag and CHANGELOG.md agree; the systemd unit passes `systemd-analyze verify` without a
warning; the alert rules and the dashboard are well formed (every rule keeps `namespace` in its aggregations and
selects its scrape job, by a scan of its expression that is itself tested on a broken copy; every selector on a
histogram bound matches both spellings, le="5" and Prometheus 3's le="5.0", and each such alert fires in a promtool
test fed each; every alert fires in a promtool test beside a second namespace; every panel selects the dashboard's
namespace), and the Dockerfile builds librdkafka with the set-up's own script. The examples (Ingress, HTTPRoute)
publish only their path of their Service over TLS. (That the dashboard and the rules name only metrics the worker
exports is checked against a live /metrics by MetricsEndpointTests; the desk's, receipt_worker_desk_*, here against
the desk's source.)

    .deps/venv/bin/python Tests/deploy/check_deploy.py --binary .build/debug/receipt-worker

(.deps/venv and .deps/checkov: scripts/setup.sh, from scripts/requirements-test.txt and requirements-checkov.txt;
kubectl, which renders the kustomizations and which create-secrets.sh runs, is on these machines.) Prints one line
per check, prefixed with its combination; exit 1 when any fails."""
import argparse, base64, glob, json, os, re, shutil, subprocess, sys, tempfile
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crd_schema  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
deploy = os.path.join(root, "deploy")
failures = []
# The combination being checked (COMBINATIONS): each of its checks is printed, and counted, under its name.
scope = ""


def check(name, ok, detail=""):
    name = f"[{scope}] {name}" if scope else name
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
EXAMPLES = ("ingress-example.yaml", "httproute-example.yaml", "desk-ingress-example.yaml", "desk-httproute-example.yaml",
            "kafka-users-example.yaml")
# Every combination the deploy check renders and checks: deploy/kubernetes with each component alone and all of
# them, and App Review's overlay of it (alone, and over the base with components). (name, overlay, components)
COMBINATIONS = [
    ("base", None, []),
    ("desk", None, ["components/desk"]),
    ("multi-zone", None, ["components/multi-zone"]),
    ("monitoring", None, ["components/monitoring"]),
    ("desk, multi-zone, monitoring", None, ["components/desk", "components/multi-zone", "components/monitoring"]),
    ("app-review", "overlays/app-review", []),
    ("app-review with desk, multi-zone", "overlays/app-review", ["components/desk", "components/multi-zone"]),
    # TLS to PostgreSQL: each pod that opens the ledger names the CA (the lines deploy/README.md says to uncomment).
    ("desk, TLS to PostgreSQL", None, ["components/desk"], {
        name: f"ledger.ssl_root_cert_file=/run/secrets/{secret}/postgres-ca.crt\n" for name, secret in [
            ("worker.properties", "receipt-worker"), ("operator.properties", "receipt-worker-operator"),
            ("migrate.properties", "receipt-worker-migrate"), ("components/desk/desk.properties", "receipt-worker-desk")]}),
]
# The combination the runbook's commands are checked against: every role deployed.
FULLEST = "desk, multi-zone, monitoring"
# The one step that makes every Secret (deploy/README.md, "Secrets").
SECRETS_SCRIPT = "deploy/kubernetes/create-secrets.sh"
# Where a pod's configuration names its secret files.
SECRETS_ROOT = "/run/secrets/"
NOTIFICATIONS_PATH = "/notifications/apple"
DESK_PATH = "/desk"
# What `receipt-worker desk` cannot start without (WorkerConfiguration.Desk.checkedForDesk): check-config does not
# require them (they are the desk's alone), so the desk's configuration is checked for them here.
DESK_REQUIRED = ("desk.listen", "desk.public_url", "desk.oidc.issuer", "desk.oidc.client_id",
                 "desk.oidc.client_secret_file", "desk.session_key_file", "metrics.listen", "ledger.url_file")


def render_combination(top, overlay, components, append=None):
    """deploy/ copied under top, its deploy/kubernetes/kustomization.yaml listing `components`, rendered by
    `kubectl kustomize` (deploy/kubernetes, or the overlay under deploy/). `append`: {file in deploy/kubernetes:
    text added to it}. Returns (the folder rendered, its objects)."""
    copy = os.path.join(top, "deploy")
    shutil.copytree(deploy, copy)
    path = os.path.join(copy, "kubernetes", "kustomization.yaml")
    text = open(path).read()
    listed = re.sub(r"^components: \[\]$", "components: [" + ", ".join(components) + "]", text, count=1, flags=re.M)
    if components and listed == text:
        raise RuntimeError("deploy/kubernetes/kustomization.yaml has no `components: []` line to list components on")
    with open(path, "w") as f:
        f.write(listed)
    for name, more in (append or {}).items():
        with open(os.path.join(copy, "kubernetes", name), "a") as f:
            f.write(more)
    folder = os.path.join(copy, overlay or "kubernetes")
    run = subprocess.run(["kubectl", "kustomize", folder], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(run.stderr.strip())
    return folder, [d for d in yaml.safe_load_all(run.stdout) if d]


def effective_config(text, container, config_maps):
    """A role's configuration as the worker reads it: its properties file, then the RECEIPT_WORKER_* variables of
    its container (env values, and envFrom ConfigMaps): `.` written `__`, keys under kafka. lower-cased."""
    config = properties(text or "")
    variables = {}
    by_name = {m["metadata"]["name"]: m for m in config_maps}
    for source in container.get("envFrom", []):
        variables.update(by_name.get(source.get("configMapRef", {}).get("name"), {}).get("data", {}))
    variables.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    for name, value in variables.items():
        if name.startswith("RECEIPT_WORKER_") and "__" in name:
            key = name[len("RECEIPT_WORKER_"):].replace("__", ".")
            config[key.lower()] = value
    return config


def validate_schemas(objects, where):
    """Every object against its schema: the Kubernetes JSON schemas (kubernetes-validate, strict: an unknown field
    fails) for the oldest Kubernetes we support and the newest the package knows; KEDA's and the Prometheus
    Operator's kinds against their CRDs vendored at pinned releases (Tests/deploy/crds/), and KEDA's Kafka trigger
    also against Tests/deploy/keda-schema.json (the Kafka scaler's own metadata and parameters)."""
    try:
        import jsonschema, kubernetes_validate
    except ImportError as error:
        check("kubernetes-validate is installed (bash scripts/setup.sh; run with .deps/venv/bin/python)", False, error)
        return
    versions = [OLDEST_KUBERNETES, kubernetes_validate.utils.latest_version()]
    here = os.path.dirname(os.path.abspath(__file__))
    crds = crd_schema.load(os.path.join(here, "crds"))
    keda = json.load(open(os.path.join(here, "keda-schema.json")))
    for resource in objects:
        name = f"{resource['kind']} {resource['metadata']['name']} ({where})"
        errors = crd_schema.errors(crds, resource)
        if errors is not None:
            check(f"{name} is valid for its CRD (Tests/deploy/crds/, {resource['apiVersion']})", not errors, errors)
            if resource["apiVersion"].startswith("keda.sh/"):
                schema = dict(keda["kinds"].get(resource["kind"], {"not": {}}), **{"$defs": keda["$defs"]})
                errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
                          for e in jsonschema.Draft202012Validator(schema).iter_errors(resource)]
                check(f"{name} uses only the Kafka scaler's fields (Tests/deploy/keda-schema.json)", not errors, errors)
            continue
        errors = []
        for version in versions:
            try:
                kubernetes_validate.validate(resource, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                errors.append(f"{version}: {'.'.join(map(str, e.path))}: {e.message}")
            except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as e:
                errors.append(f"{version}: {e.message} (a custom resource: vendor its CRD in Tests/deploy/crds/)")
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


def readme_secret_files():
    """The files deploy/README.md's "Secrets" step has the operator put in the directory create-secrets.sh reads:
    the first column of the table whose header starts with `| file`."""
    text = open(os.path.join(deploy, "README.md")).read()
    section = text.partition("\n### Secrets\n")[2].partition("\n### ")[0]
    files, in_table = [], False
    for line in section.splitlines():
        if line.startswith("| file"):
            in_table = True
        elif in_table and line.startswith("|"):
            name = re.match(r"\|\s*`([^`]+)`", line)
            if name:
                files.append(name.group(1))
        elif in_table:
            break
    return section, files


def stub_secret_files(folder, names):
    """Stub values for the files the README lists: distinct, and valid where the worker parses them (the API key
    is Apple's public test key; the URLs name two roles)."""
    test_key = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "AppleClientTests", "testSigningKey.p8")
    values = {"app-store-key.p8": open(test_key).read(),
              "ledger-url": "postgresql://receipt_worker_app:stub-app@db.example:5432/receipts\n",
              "ledger-migrate-url": "postgresql://receipt_worker_owner:stub-owner@db.example:5432/receipts\n",
              "desk-ledger-url": "postgresql://receipt_worker_desk:stub-desk@db.example:5432/receipts\n",
              "desk-session-key": "5f" * 32, "desk-erasure-key": "6e" * 32}
    for name in names:
        with open(os.path.join(folder, name), "w") as f:
            f.write(values.get(name, f"stub {name}\n"))


def documented_secrets(namespace, kustomization, refusals=False, desk=True):
    """Runs the documented secret step (create-secrets.sh DIR KUSTOMIZATION) offline on stub files named as
    deploy/README.md lists them. Returns ({Secret name: {key: text}}, the Secret objects), or (None, []) when the
    step fails. With `refusals`, also what it refuses and the desk's session key it makes (once: it is one script)."""
    section, names = readme_secret_files()
    script = os.path.join(root, SECRETS_SCRIPT)
    check(f"deploy/README.md's Secrets step is `{SECRETS_SCRIPT} DIR | kubectl apply -f -`",
          re.search(re.escape(SECRETS_SCRIPT) + r" \S+ \| kubectl apply -f -", section) is not None,
          "deploy/README.md, \"Secrets\": show the script's command")
    check("deploy/README.md lists the files the Secrets step reads (a table: | file | ...)", bool(names), names)
    if not shutil.which("kubectl"):
        check(f"kubectl is installed ({SECRETS_SCRIPT} builds the Secrets with it, offline)", False)
        return None, []
    with tempfile.TemporaryDirectory() as folder:
        stub_secret_files(folder, names)
        environment = {"PATH": os.environ.get("PATH", ""), "HOME": folder}
        run = subprocess.run(["bash", script, folder, kustomization], capture_output=True, text=True, env=environment)
        check(f"{SECRETS_SCRIPT} runs offline on the files deploy/README.md lists",
              run.returncode == 0, run.stderr.strip() + " (the README's table of files and the script disagree?)")
        if run.returncode != 0:
            return None, []
        objects = [d for d in yaml.safe_load_all(run.stdout) if d]
        # Only the files of the Secrets it makes are needed: without the desk, none of the desk's.
        if not desk:
            for name in [n for n in names if n.startswith("desk-")]:
                os.remove(os.path.join(folder, name))
            bare = subprocess.run(["bash", script, folder, kustomization], capture_output=True, text=True, env=environment)
            check(f"{SECRETS_SCRIPT} needs none of the desk's files without the desk", bare.returncode == 0
                  and bare.stdout == run.stdout and not os.path.exists(os.path.join(folder, "desk-session-key"))
                  and not os.path.exists(os.path.join(folder, "desk-erasure-key")),
                  bare.stderr.strip())
        if not refusals:
            objects_and_created = objects
            created = {d["metadata"]["name"]: {k: base64.b64decode(v).decode() for k, v in (d.get("data") or {}).items()}
                       for d in objects}
            kinds = sorted({f"{d.get('kind')} in {d.get('metadata', {}).get('namespace')}" for d in objects})
            check(f"{SECRETS_SCRIPT} prints only Secrets, in the namespace {namespace}",
                  kinds == [f"Secret in {namespace}"], kinds)
            for name, keys in sorted(created.items()):
                print(f"      {SECRETS_SCRIPT} creates the Secret {name}: {', '.join(sorted(keys))}")
            return created, objects_and_created
        # The console's session key (and the erasure key): made when absent (64 hex digits, readable by its owner
        # only), kept after.
        os.remove(os.path.join(folder, "desk-session-key"))
        made = subprocess.run(["bash", script, folder, kustomization], capture_output=True, text=True, env=environment)
        key_path = os.path.join(folder, "desk-session-key")
        key = open(key_path).read() if os.path.exists(key_path) else ""
        again = subprocess.run(["bash", script, folder, kustomization], capture_output=True, text=True, env=environment)
        kept = open(key_path).read() if os.path.exists(key_path) else ""
        check(f"{SECRETS_SCRIPT} makes desk-session-key when it is absent (openssl rand -hex 32, mode 0600), "
              "and the next run keeps it",
              made.returncode == 0 and again.returncode == 0 and re.fullmatch(r"[0-9a-f]{64}", key) is not None
              and kept == key and os.stat(key_path).st_mode & 0o077 == 0
              and "session-key: " + base64.b64encode(key.encode()).decode() in again.stdout,
              (made.stderr + again.stderr).strip() or key)
        def refused_when(name, text, what):
            original = open(os.path.join(folder, name)).read()
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
            refused = subprocess.run(["bash", script, folder, kustomization], capture_output=True, text=True,
                                     env=environment)
            with open(os.path.join(folder, name), "w") as f:
                f.write(original)
            check(f"{SECRETS_SCRIPT} refuses {what}", refused.returncode != 0 and not refused.stdout.strip(),
                  refused.stderr.strip())
        owner = open(os.path.join(folder, "ledger-migrate-url")).read()
        refused_when("ledger-url", owner, "the schema owner's URL as the workers' ledger-url")
        refused_when("desk-ledger-url", owner, "the schema owner's URL as the desk's ledger-url")
        refused_when("desk-ledger-url", open(os.path.join(folder, "ledger-url")).read(),
                     "the workers' URL as the desk's ledger-url")
        refused_when("desk-kafka-password", open(os.path.join(folder, "kafka-password")).read(),
                     "the workers' Kafka password as the desk's")
        refused_when("operator-kafka-password", open(os.path.join(folder, "kafka-password")).read(),
                     "the workers' Kafka password as the operator's")
        refused_when("desk-session-key", "not a key\n", "a desk-session-key that is not 64 hex digits")
        refused_when("desk-erasure-key", "not a key\n", "a desk-erasure-key that is not 64 hex digits")
    kinds = sorted({f"{d.get('kind')} in {d.get('metadata', {}).get('namespace')}" for d in objects})
    check(f"{SECRETS_SCRIPT} prints only Secrets, in the namespace {namespace}",
          kinds == [f"Secret in {namespace}"], kinds)
    created = {d["metadata"]["name"]: {k: base64.b64decode(v).decode() for k, v in (d.get("data") or {}).items()}
               for d in objects}
    for name, keys in sorted(created.items()):
        print(f"      {SECRETS_SCRIPT} creates the Secret {name}: {', '.join(sorted(keys))}")
    return created, objects


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")


def pod_template(resource):
    spec = resource.get("spec", {})
    if resource["kind"] == "CronJob":
        spec = spec.get("jobTemplate", {}).get("spec", {})
    return spec.get("template", {})


def command_line(container):
    """(the config file, the --set pairs) of a container's args."""
    args = container.get("args", [])
    config = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--config"), None)
    sets = dict(args[i + 1].split("=", 1) for i, a in enumerate(args[:-1]) if a == "--set" and "=" in args[i + 1])
    return config, sets


def mounted_file(pod, container, path, config_maps):
    """The text of the file at path in a container, when a ConfigMap volume mounts it."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        if "configMap" in volume and os.path.dirname(path) == mount["mountPath"].rstrip("/"):
            return config_maps.get(volume["configMap"]["name"], {}).get("data", {}).get(os.path.basename(path))
    return None


def tool_config(pod, container, config_maps):
    """The configuration of a container that only waits for commands (the operator's pod: its command is sleep):
    the one properties file of the ConfigMap it mounts, which the runbook's commands name with --config."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        name = volumes.get(mount["name"], {}).get("configMap", {}).get("name")
        files = [f for f in config_maps.get(name, {}).get("data", {}) if f.endswith(".properties")]
        if container.get("command") and len(files) == 1:
            return os.path.join(mount["mountPath"], files[0])
    return None


def secret_mounts(pod, container, created):
    """{path in the container: (Secret, key)} of every Secret file mounted in it (volumes with or without items,
    projected Secrets), and the Secrets it reads through its environment as [(Secret, key or None for all)]."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    files = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        sources = [volume["secret"] | {"name": volume["secret"]["secretName"]}] if "secret" in volume else [
            s["secret"] for s in volume.get("projected", {}).get("sources", []) if "secret" in s]
        for source in sources:
            items = source.get("items")
            keys = {i["path"]: i["key"] for i in items} if items else {k: k for k in created.get(source["name"], {})}
            for relative, key in keys.items():
                files[os.path.join(mount["mountPath"], relative)] = (source["name"], key)
    environment = [(e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
                   for e in container.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})]
    environment += [(e["secretRef"]["name"], None) for e in container.get("envFrom", []) if "secretRef" in e]
    return files, environment


def configured_files(config):
    """The files a configuration names that must come from a Secret: every *_file key, librdkafka's CA, and any
    value under /run/secrets/."""
    return {k: v for k, v in config.items()
            if k.endswith("_file") or k == "kafka.ssl.ca.location" or v.startswith(SECRETS_ROOT)}


def secret_references(rendered, created):
    """Every Secret and key a workload or KEDA reads is one the documented step creates, and nothing is mounted
    that is not read. Returns, per workload container, what check-config needs: (name, pod, container, config text,
    --set pairs, mounted files)."""
    config_maps = {d["metadata"]["name"]: d for d in rendered if d["kind"] == "ConfigMap"}
    roles, read_anywhere = [], set()
    for workload in (d for d in rendered if d["kind"] in WORKLOAD_KINDS):
        pod = pod_template(workload).get("spec", {})
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            name = f"{workload['kind']} {workload['metadata']['name']}"
            if len(pod.get("containers", [])) > 1:
                name += f" (container {container['name']})"
            config_path, sets = command_line(container)
            if config_path is None:
                config_path = tool_config(pod, container, config_maps)
            text = mounted_file(pod, container, config_path, config_maps) if config_path else None
            check(f"the {name}'s --config {config_path} is a file of a mounted ConfigMap",
                  config_path is None or text is not None, config_path)
            config = {**effective_config(text, container, list(config_maps.values())), **sets}
            files, environment = secret_mounts(pod, container, created)
            reads = set()
            for key, path in sorted(configured_files(config).items()):
                for one in (p.strip() for p in path.split(",")):
                    found = files.get(one)
                    secret, secret_key = found or (None, None)
                    ok = found is not None and secret in created and secret_key in created[secret]
                    source = f"Secret {secret}, key {secret_key}" if found else "a mounted Secret"
                    check(f"the {name} reads {key}={one}: {source}, made by {SECRETS_SCRIPT}",
                          ok, f"{one} is not a file of a mounted Secret" if found is None else
                          f"{SECRETS_SCRIPT} creates no key {secret_key} in a Secret {secret}")
                    if found:
                        reads.add(found)
            for secret, key in environment:
                ok = secret in created and (key is None or key in created[secret])
                check(f"the {name} reads Secret {secret}, key {key or '(all)'} from its environment, made by "
                      f"{SECRETS_SCRIPT}", ok, f"{SECRETS_SCRIPT} creates no {secret}/{key}")
                reads |= {(secret, k) for k in ([key] if key else created.get(secret, {}))}
            for volume in pod.get("volumes", []):
                name_of = volume.get("secret", {}).get("secretName")
                items = volume.get("secret", {}).get("items", [])
                missing = [i["key"] for i in items if i["key"] not in created.get(name_of, {})]
                if name_of:
                    check(f"the {name}'s volume {volume['name']} mounts Secret {name_of}, made by {SECRETS_SCRIPT}",
                          name_of in created and not missing, f"not created: {name_of} {missing}")
            unread = sorted(f"{s}/{k} at {p}" for p, (s, k) in files.items() if (s, k) not in reads)
            check(f"the {name} mounts no secret it never reads", not unread, unread)
            read_anywhere |= reads
            if container.get("args", [])[:1] in (["run"], ["receive"], ["ledger"], ["desk"]) or (
                    container.get("command") and text is not None):
                roles.append((name, container, text or "", sets, files))
    for auth in (d for d in rendered if d["kind"] == "TriggerAuthentication"):
        for ref in auth["spec"].get("secretTargetRef", []):
            ok = ref["name"] in created and ref["key"] in created[ref["name"]]
            check(f"KEDA's TriggerAuthentication {auth['metadata']['name']} reads {ref['parameter']} from Secret "
                  f"{ref['name']}, key {ref['key']}, made by {SECRETS_SCRIPT}", ok,
                  f"{SECRETS_SCRIPT} creates no key {ref['key']} in a Secret {ref['name']}")
            read_anywhere.add((ref["name"], ref["key"]))
    unread = sorted(f"{s}/{k}" for s, keys in created.items() for k in keys if (s, k) not in read_anywhere)
    check(f"every key {SECRETS_SCRIPT} creates is read by a workload or KEDA", not unread, unread)
    return roles


def roles_check_config(roles, created, binary, config_maps):
    """Each role's configuration passes `receipt-worker check-config` with its mounted Secret files, and only those,
    present: written under a temporary root that mirrors the mount paths."""
    for name, container, text, sets, files in roles:
        with tempfile.TemporaryDirectory() as top:
            for path, (secret, key) in files.items():
                if key in created.get(secret, {}):  # (a key not created fails its own check above)
                    os.makedirs(os.path.dirname(top + path), exist_ok=True)
                    with open(top + path, "w") as f:
                        f.write(created[secret][key])
            config = os.path.join(top, "config.properties")
            with open(config, "w") as f:
                f.write(text.replace(SECRETS_ROOT, top + SECRETS_ROOT))
            arguments = [binary, "check-config", "--config", config]
            for key, value in sets.items():
                arguments += ["--set", f"{key}={value.replace(SECRETS_ROOT, top + SECRETS_ROOT)}"]
            environment = {"PATH": os.environ.get("PATH", "")}
            for source in container.get("envFrom", []):
                environment.update(config_maps.get(source.get("configMapRef", {}).get("name"), {}).get("data", {}))
            for variable in container.get("env", []):
                if variable["name"].startswith("RECEIPT_WORKER_") or variable["name"] == "LOG_LEVEL":
                    environment[variable["name"]] = variable.get("value", "stub-from-the-pod")
            run = subprocess.run(arguments, capture_output=True, text=True, env=environment)
            check(f"the {name}'s configuration passes receipt-worker check-config with its mounted files",
                  run.returncode == 0, (run.stdout + run.stderr).strip())


def grant_statements(text):
    """The GRANT statements of a text of SQL: each from GRANT to its semicolon, over as many lines as it takes,
    its spaces made single."""
    return sorted(" ".join(statement.split()) + ";" for statement in
                  re.findall(r"^\s*(GRANT\s[^;]*);", text, re.M))


def documented_grants():
    """The GRANT statements docs/deployment.md lists (its SQL blocks' GRANT statements)."""
    return grant_statements(open(os.path.join(root, "docs", "deployment.md")).read())


def migrate_job(rendered, roles, created, binary):
    """The migrate Job grants the workers' role and the support desk's itself (ledger migrate --grant-to ROLE
    --grant-desk-to DESK_ROLE, not --print), two roles, and what it grants is what docs/deployment.md lists: the
    binary prints the SQL it runs (--print) without a database."""
    jobs = [d for d in rendered if d["kind"] == "Job"]
    job = next((d for d in jobs if pod_template(d)["spec"]["containers"][0].get("args", [])[:2] == ["ledger", "migrate"]),
               None)
    check("a Job runs receipt-worker ledger migrate", job is not None)
    if job is None:
        return
    args = pod_template(job)["spec"]["containers"][0]["args"]
    role = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--grant-to"), None)
    desk_role = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--grant-desk-to"), None)
    check("the migrate Job grants the workers' role itself (--grant-to ROLE, without --print)",
          role is not None and "--print" not in args, args)
    desks = [d for d in rendered if d["kind"] in WORKLOAD_KINDS
             and pod_template(d)["spec"]["containers"][0].get("args", [])[:1] == ["desk"]]
    check("the migrate Job grants the support desk's role (--grant-desk-to DESK_ROLE), a role of its own",
          not desks or (desk_role is not None and desk_role != role), args)
    name, container, text, sets, files = next(r for r in roles if r[0] == f"Job {job['metadata']['name']}")
    secrets = sorted({s for s, _ in files.values()})
    check("the migrate Job mounts only its own Secret, with only the schema owner's URL (and PostgreSQL's CA)",
          sorted(files.values()) in ([("receipt-worker-migrate", "ledger-migrate-url")],
                                     [("receipt-worker-migrate", "ledger-migrate-url"),
                                      ("receipt-worker-migrate", "postgres-ca.crt")]),
          sorted(files.values()))
    owners = sorted(f"{s}/{k}" for s, keys in created.items() for k in keys
                    if k == "ledger-migrate-url" and s not in secrets)
    check("no other Secret holds the schema owner's URL (the workers never see it)", not owners, owners)
    if role is None:
        return
    with tempfile.TemporaryDirectory() as top:
        for path, (secret, key) in files.items():
            if key in created.get(secret, {}):
                os.makedirs(os.path.dirname(top + path), exist_ok=True)
                with open(top + path, "w") as f:
                    f.write(created[secret][key])
        config = os.path.join(top, "migrate.properties")
        with open(config, "w") as f:
            f.write(text.replace(SECRETS_ROOT, top + SECRETS_ROOT))
        arguments = [binary, "ledger", "migrate", "--config", config, "--grant-to", role, "--print"]
        arguments += ["--grant-desk-to", desk_role] if desk_role else []
        run = subprocess.run(arguments, capture_output=True, text=True, env={"PATH": os.environ.get("PATH", "")})
    check("the migrate Job's ledger migrate --print runs with its configuration and mounted files",
          run.returncode == 0, run.stderr.strip())
    granted = grant_statements(run.stdout)
    check("no ledger function runs with its owner's rights (SECURITY DEFINER): EXECUTE grants no more than rows",
          run.returncode == 0 and "SECURITY DEFINER" not in run.stdout.upper())
    # What docs/deployment.md lists for the roles this Job grants (the desk's only with the desk).
    documented = [g for g in documented_grants() if g.endswith(f" TO {role};") or (desk_role and g.endswith(f" TO {desk_role};"))]
    both = f"--grant-to {role}" + (f" --grant-desk-to {desk_role}" if desk_role else "")
    check(f"docs/deployment.md lists exactly the grants `ledger migrate {both}` applies (its GRANT statements)",
          granted and granted == documented,
          f"the binary grants but the doc lacks: {sorted(set(granted) - set(documented))}; "
          f"the doc lists but the binary does not grant: {sorted(set(documented) - set(granted))}")
    if desk_role:
        desk_grants = [g for g in granted if g.endswith(f" TO {desk_role};")]
        # What each grant allows: the words between GRANT and ON (functions run as their caller: none is SECURITY
        # DEFINER, so EXECUTE lets a function do only what the role's own privileges allow).
        deleting = [g for g in desk_grants if re.search(r"\b(DELETE|TRUNCATE|ALL|CREATE)\b", g.split(" ON ")[0])]
        audit = [g for g in desk_grants if ".desk_audit " in g]
        # The audit: read and appended to; changed only in the columns an erasure rewrites.
        erasing = "GRANT UPDATE (player, request, answer) ON "
        check(f"the desk's role ({desk_role}) may delete nothing, and only read and append to the audit (and rewrite"
              " the columns naming a player it erases)",
              desk_grants and not deleting and audit
              and all(g.startswith("GRANT SELECT, INSERT ON ") or g.startswith(erasing) for g in audit),
              deleting or audit or "no grant to the desk's role")


def selects(selector, labels):
    """Whether a label selector (matchLabels, matchExpressions) selects pods with these labels."""
    if not all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        if not {"In": labels.get(key) in values, "NotIn": labels.get(key) not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}[operator]:
            return False
    return True


def disruption_budgets(rendered):
    """No PodDisruptionBudget selects a Job's pods (a drain would wait for them, and they count against the
    workers' budget)."""
    for pdb in (d for d in rendered if d["kind"] == "PodDisruptionBudget"):
        selector = pdb["spec"].get("selector", {})
        for job in (d for d in rendered if d["kind"] in ("Job", "CronJob")):
            labels = pod_template(job).get("metadata", {}).get("labels", {})
            check(f"the PodDisruptionBudget {pdb['metadata']['name']} does not select the {job['kind']} "
                  f"{job['metadata']['name']}'s pods", not selects(selector, labels), f"{selector} matches {labels}")


def release_versions(kustomization):
    """One release: BuildInfo.version (receipt-worker --version), the image tag and CHANGELOG.md's newest release."""
    build_info = open(os.path.join(root, "Sources", "ReceiptWorker", "BuildInfo.swift")).read()
    found = re.search(r'static\s+let\s+version\s*=\s*"([^"]+)"', build_info)
    version = found.group(1) if found else None
    check("Sources/ReceiptWorker/BuildInfo.swift names the release (BuildInfo.version)", version is not None)
    tag = next((str(i.get("newTag")) for i in kustomization.get("images", []) if i["name"] == "receipt-worker"), None)
    check(f"deploy/kubernetes/kustomization.yaml's image tag is the release ({version})", tag == version,
          f"newTag {tag} but BuildInfo.version {version}")
    path = os.path.join(root, "CHANGELOG.md")
    text = open(path).read() if os.path.exists(path) else ""
    headings = re.findall(r"^## \[?v?(\d+\.\d+\.\d+[^\]\s]*)\]?", text, re.M)
    check(f"CHANGELOG.md's newest release is the release ({version})", headings[:1] == [version],
          f"newest heading {headings[:1]} but BuildInfo.version {version}" if text else "CHANGELOG.md is missing")
    for document in ("docs/asyncapi.yaml", "docs/asyncapi-client.yaml"):
        with open(os.path.join(root, document)) as file:
            stated = str(yaml.safe_load(file).get("info", {}).get("version"))
        check(f"{document}'s info.version is the release ({version})", stated == version,
              f"info.version {stated} but BuildInfo.version {version}")


def documented_ports(rendered):
    """Every HOST:PORT/healthz, /readyz, /startupz or /metrics in the docs names a metrics port of the manifests."""
    ports = {p["containerPort"] for d in rendered if d["kind"] in WORKLOAD_KINDS
             for c in pod_template(d).get("spec", {}).get("containers", []) for p in c.get("ports", [])
             if p.get("name") == "metrics"}
    pages = [os.path.join(root, "README.md"), os.path.join(deploy, "README.md")] + [
        os.path.join(root, "docs", n) for n in sorted(os.listdir(os.path.join(root, "docs"))) if n.endswith(".md")]
    wrong = []
    for page in pages:
        for number, line in enumerate(open(page), 1):
            for port in re.findall(r"\b[\w.-]+:(\d{2,5})/(?:healthz|readyz|startupz|metrics)\b", line):
                if int(port) not in ports:
                    wrong.append(f"{os.path.relpath(page, root)}:{number}: {port}")
    check(f"every port the docs curl for /healthz, /readyz, /startupz, /metrics is the metrics port {sorted(ports)}",
          not wrong, wrong)


def kubernetes(binary):
    """The static checks of deploy/kubernetes, then every combination rendered and checked (combination())."""
    folder = os.path.join(deploy, "kubernetes")
    sources = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.yaml")) + glob.glob(os.path.join(folder, "components", "*", "*.yaml"))
                       + glob.glob(os.path.join(deploy, "overlays", "*", "*.yaml"))):
        name = os.path.relpath(path, folder)
        with open(path) as f:
            try:
                sources[os.path.basename(name) if "/" in name and name.endswith("-example.yaml") else name] = [
                    d for d in yaml.safe_load_all(f) if d]
                check(f"{os.path.relpath(path, deploy)} parses", True)
            except yaml.YAMLError as error:
                check(f"{os.path.relpath(path, deploy)} parses", False, error)
    kustomization = sources["kustomization.yaml"][0]
    listed = list(kustomization["resources"])
    for component in glob.glob(os.path.join(folder, "components", "*", "kustomization.yaml")):
        spec = yaml.safe_load(open(component))
        check(f"{os.path.relpath(component, deploy)} is a kustomize Component", spec.get("kind") == "Component")
        listed += [os.path.join(os.path.relpath(os.path.dirname(component), folder), r) for r in spec.get("resources", [])]
    check("the kustomization and its components list existing files",
          all(os.path.exists(os.path.join(folder, r)) for r in listed), listed)
    unlisted = [n for n in sources if n not in listed and not n.endswith("kustomization.yaml")
                and n not in EXAMPLES and not n.startswith("../")]
    check("every manifest is in the kustomization or a component, or is an example applied by hand", not unlisted,
          unlisted)
    check("no example is applied by the kustomization (their hosts, TLS and classes are placeholders)",
          not [n for n in listed if os.path.basename(n) in EXAMPLES])
    check("the ConfigMap is generated from worker.properties (a change gives a new name and rolls the pods)",
          any("worker.properties" in g.get("files", []) for g in kustomization.get("configMapGenerator", [])))
    check("deploy/kubernetes/kustomization.yaml ships with no component (components: [], each opt-in)",
          re.search(r"^components: \[\]$", open(os.path.join(folder, "kustomization.yaml")).read(), re.M) is not None
          and not kustomization.get("components"))
    check("the namespace is written in kustomization.yaml alone (no manifest or example sets one)",
          not [n for n, docs in sources.items() if not n.endswith("kustomization.yaml")
               for d in docs if d.get("metadata", {}).get("namespace")])
    if not shutil.which("kubectl"):
        check("kubectl is installed (it renders the kustomizations, and create-secrets.sh builds the Secrets)", False)
        return
    for example in EXAMPLES:
        documents = [d for d in sources.get(example, []) if d.get("kind") in ("Ingress", "HTTPRoute")]
        if documents:
            validate_schemas(documents, example)
    rendered_by = {}
    global scope
    for name, overlay, components, *appended in COMBINATIONS:
        scope = name
        print(f"--    {name}: {overlay or 'deploy/kubernetes'}" + (f" with {', '.join(components)}" if components else ""))
        with tempfile.TemporaryDirectory() as top:
            try:
                where, rendered = render_combination(top, overlay, components, append=(appended or [None])[0])
            except RuntimeError as error:
                check("kubectl kustomize renders it", False, error)
                continue
            check("kubectl kustomize renders it", True)
            rendered_by[name] = rendered
            combination(name, where, rendered, components, overlay, sources, binary)
    scope = ""
    # A change of a properties file changes the pod template: the ConfigMap's name is the hash of its content.
    with tempfile.TemporaryDirectory() as top:
        _, before = render_combination(top, None, [])
    with tempfile.TemporaryDirectory() as top:
        _, after = render_combination(top, None, [], append={"worker.properties": "worker.max_in_flight=999\n"})
    template = lambda objects: next(d for d in objects if d["kind"] == "Deployment"
                                    and d["metadata"]["name"] == "receipt-worker")["spec"]["template"]
    check("a change of worker.properties changes the pod template (the ConfigMap's name carries its content's hash)",
          template(before) != template(after))
    release_versions(kustomization)
    if "base" in rendered_by:
        documented_ports(rendered_by["base"])
    checkov(rendered_by)
    if FULLEST in rendered_by:
        runbook_commands(rendered_by[FULLEST], rendered_by)


def combination(name, folder, rendered, components, overlay, sources, binary):
    """The checks of one rendered combination: schemas, the Secrets step, each role's configuration, and the
    objects agreeing with each other and with the configuration."""
    desk_expected = "components/desk" in components
    validate_schemas(rendered, "rendered")
    namespaces = [d["metadata"]["name"] for d in rendered if d["kind"] == "Namespace"]
    check("one Namespace, the kustomization's", len(namespaces) == 1, namespaces)
    namespace = namespaces[0] if namespaces else None
    secrets_rendered = [f"{d['kind']} {d['metadata']['name']}" for d in rendered if d["kind"] == "Secret"]
    check(f"the kustomization applies no Secret (they come from {SECRETS_SCRIPT}; apply -k would overwrite them)",
          not secrets_rendered, secrets_rendered)
    created, secret_objects = documented_secrets(namespace, folder, refusals=(name == "desk"), desk=desk_expected)
    validate_schemas(secret_objects, SECRETS_SCRIPT)
    documented = created is not None
    created = created or {}
    documents = {}
    for d in rendered:
        documents.setdefault(d.get("kind"), []).append(d)
    for kind in ["Namespace", "ServiceAccount", "Deployment", "ConfigMap", "Service", "PodDisruptionBudget",
                 "NetworkPolicy", "ScaledObject", "TriggerAuthentication"]:
        check(f"a {kind}", kind in documents)
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
    config = effective_config(config_map["data"]["worker.properties"], container, documents["ConfigMap"])
    check("the Deployment has no replicas (KEDA owns the count; apply -k would reset it)",
          "replicas" not in deployment["spec"], deployment["spec"].get("replicas"))

    # The generated ConfigMap: named with a hash of its content (a change of content renames it: kubernetes()).
    base = "receipt-worker"
    check("the ConfigMap's name carries the hash of its content",
          re.fullmatch(base + r"-[a-z0-9]{10}", config_map["metadata"]["name"]) is not None, config_map["metadata"]["name"])

    # The image: a placeholder in deployment.yaml, set by kustomize's images transformer.
    source_image = next(d for d in sources["deployment.yaml"] if d["kind"] == "Deployment")[
        "spec"]["template"]["spec"]["containers"][0]["image"]
    kustomization = sources["kustomization.yaml"][0]
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
    secret_name = volumes["secrets"]["secret"]["secretName"]
    # What every workload and KEDA read resolves to what the documented step creates, and nothing more is mounted.
    roles = secret_references(rendered, created) if documented else []
    check("the config file is mounted where args read it",
          any(a.startswith(mounts["config"]) for a in container["args"]) and volumes["config"]["configMap"]["name"]
          == config_map["metadata"]["name"])

    # Each Service, PodDisruptionBudget and NetworkPolicy selects the pods of exactly one workload: the workers'
    # (metrics, PDB, policy), the receiver's (notifications Service, its PDB and policy) or the migrate Job's
    # (its policy): never the Job's pods beside the workers'.
    templates = {f"{d['kind']} {d['metadata']['name']}": pod_template(d).get("metadata", {}).get("labels", {})
                 for d in rendered if d["kind"] in WORKLOAD_KINDS}
    for resource in documents["Service"] + documents["PodDisruptionBudget"] + documents["NetworkPolicy"]:
        spec = resource["spec"]
        selector = {"matchLabels": spec["selector"]} if resource["kind"] == "Service" else (
            spec.get("podSelector") or spec.get("selector") or {})
        owners = [n for n, l in templates.items() if (selector.get("matchLabels") or selector.get("matchExpressions"))
                  and selects(selector, l)]
        check(f"the {resource['kind']} {resource['metadata']['name']} selects the pods of one workload",
              len(owners) == 1, f"{selector} -> {owners}")
    # Spreading: over nodes, required; over zones, preferred in the base (nodes without a zone label would leave
    # the pods Pending), required with components/multi-zone. The operator's pod has one replica, when any.
    zones = "DoNotSchedule" if "components/multi-zone" in components else "ScheduleAnyway"
    for name, d in deployments.items():
        if name == "receipt-worker-operator":
            continue
        spread = d["spec"]["template"]["spec"].get("topologySpreadConstraints", [])
        check(f"the Deployment {name} spreads its replicas over nodes",
              any(c.get("topologyKey") == "kubernetes.io/hostname" and c.get("whenUnsatisfiable") == "DoNotSchedule"
                  for c in spread), spread)
        check(f"the Deployment {name} spreads its replicas over zones, {zones}",
              [c.get("whenUnsatisfiable") for c in spread if c.get("topologyKey") == "topology.kubernetes.io/zone"]
              == [zones], spread)
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
    check("the worker's memory request covers the measured peak (338 MiB)",
          request.endswith("Mi") and int(request[:-2]) >= 338, request)
    # PostgreSQL connections at the most replicas KEDA may start: under the server's default 100.
    pool = int(config.get("ledger.pool_size", "16"))
    most = documents["ScaledObject"][0]["spec"]["maxReplicaCount"]
    # The support desk's replicas hold a pool of their own (Sources/ReceiptWorker/DeskProcess.swift, its poolSize), beside the workers'.
    desk_source = open(os.path.join(root, "Sources", "ReceiptWorker", "DeskProcess.swift")).read()
    found = re.search(r"poolSize: (\d+)", desk_source)
    desk_pool = int(found.group(1)) if found else 8  # LedgerFactory.open's default
    desk_replicas = sum(d["spec"].get("replicas", 1) for d in documents["Deployment"]
                        if d["spec"]["template"]["spec"]["containers"][0].get("args", [])[:1] == ["desk"])
    check("maxReplicaCount x ledger.pool_size, and the desk's replicas x its pool, stay under PostgreSQL's default "
          "100 connections (with room)", most * pool + desk_replicas * desk_pool <= 90,
          f"{most} x {pool} + {desk_replicas} x {desk_pool}")
    # activationLagThreshold scales nothing beside a minimum, but it is the threshold of keda_scaler_active, which
    # the stalled-group alert reads: the two agree.
    activation = documents["ScaledObject"][0]["spec"]["triggers"][0]["metadata"].get("activationLagThreshold")
    rules_text = open(os.path.join(deploy, "prometheus", "receipt-worker-rules.yaml")).read()
    check("KEDA's comments claim no zero-only setting (cooldownPeriod with a minimum); activationLagThreshold is set "
          "for the alert that reads keda_scaler_active",
          (documents["ScaledObject"][0]["spec"].get("minReplicaCount", 0) == 0
           or "cooldownPeriod" not in documents["ScaledObject"][0]["spec"])
          and (activation is None or "keda_scaler_active" in rules_text), activation)

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
        receiver_out = {(p.get("protocol", "TCP"), p["port"]) for r in receiver_policy["spec"].get("egress", [])
                        for p in r.get("ports", [])}
        check("the receiver's NetworkPolicy lets it ask Apple's OCSP responders (80), and nothing of Apple's over 443",
              ("TCP", 80) in receiver_out and ("TCP", 443) not in receiver_out, sorted(receiver_out))
        ingresses = [d for d in sources.get("ingress-example.yaml", []) if d.get("kind") == "Ingress"]
        check("ingress-example.yaml has an Ingress", len(ingresses) == 1, len(ingresses))
        for ingress in ingresses:
            spec = ingress["spec"]
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
        http_routes(sources.get("httproute-example.yaml", []), "receipt-worker-notifications",
                    [p.get("port") for p in service_ports.values()], NOTIFICATIONS_PATH, "Exact")

    # The workers' NetworkPolicy: the pods' traffic and no more.
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    policy = next(p for p in documents["NetworkPolicy"] if p["metadata"]["name"] == "receipt-worker")["spec"]
    check("it restricts both directions", sorted(policy.get("policyTypes", [])) == ["Egress", "Ingress"])
    allowed = {(p.get("protocol", "TCP"), p["port"]) for rule in policy.get("egress", []) for p in rule.get("ports", [])}
    kafka_ports = {int(s.rsplit(":", 1)[1]) for s in config["kafka.bootstrap.servers"].split(",")}
    needed = {("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 80), ("TCP", 5432), ("TCP", 9092), ("TCP", 9093),
              ("TCP", 9094), ("TCP", 9096), ("TCP", 9098)}
    needed |= {("TCP", p) for p in kafka_ports}
    check("egress allows DNS, Apple (443, and 80 for its OCSP responders), Kafka (the brokers' ports) and PostgreSQL (5432)",
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

    # KEDA's credentials (each resolves to what the secret step creates: secret_references) say what the
    # worker's configuration says.
    refs = documents["TriggerAuthentication"][0]["spec"]["secretTargetRef"]
    keda = {r["parameter"]: created.get(r["name"], {}).get(r["key"]) for r in refs}
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

    if overlay is None:  # the README creates the base's topics; an overlay's are its own (deploy/README.md)
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

    receiver_checks(documents, sources, config, created, keda.get("username"), overlay is None)
    desk = [d for d in documents["Deployment"] if d["spec"]["template"]["spec"]["containers"][0].get("args", [])[:1] == ["desk"]]
    check("the support desk is deployed exactly when components/desk is used (and its Secret made only then)",
          bool(desk) == desk_expected and ("receipt-worker-desk" in created) == desk_expected,
          f"{len(desk)} desk Deployment(s), Secrets {sorted(created)}")
    if desk:
        desk_checks(documents, sources, config, created, overlay is None)
    operator_checks(documents, sources, config, created, overlay is None)
    security_contexts(rendered)
    pods_and_labels(rendered)

    # Each role as the worker itself reads it; the migrate Job's grants; disruption budgets; the migrate Job's
    # configuration agrees with the workers' on what a migration reads.
    if documented:
        roles_check_config(roles, created, binary, {d["metadata"]["name"]: d for d in documents["ConfigMap"]})
        migrate_job(rendered, roles, created, binary)
    disruption_budgets(rendered)
    migrate_maps = [d for d in documents["ConfigMap"] if "migrate.properties" in d.get("data", {})]
    migrate_config = properties(migrate_maps[0]["data"]["migrate.properties"]) if migrate_maps else {}
    shared = sorted(k for k in set(config) | set(migrate_config) if k == "apple.bundle_id" or (
        k.startswith("ledger.") and k not in ("ledger.url", "ledger.url_file", "ledger.pool_size", "ledger.migrate_on_start",
                                              "ledger.ssl_root_cert_file")))
    differ = [f"{k}: {migrate_config.get(k)} vs {config.get(k)}" for k in shared if migrate_config.get(k) != config.get(k)]
    check("migrate.properties agrees with worker.properties on apple.bundle_id and the ledger's keys",
          migrate_maps and not differ, differ or "no ConfigMap with migrate.properties")


def http_routes(routes, service, ports, path, match):
    """An example HTTPRoute publishes `path` (match type) of one Service's port, and nothing else."""
    check(f"an example HTTPRoute publishes {path} of the Service {service}", len(routes) == 1, len(routes))
    for route in routes:
        rules = route["spec"].get("rules", [])
        paths = [(m.get("path", {}).get("type"), m.get("path", {}).get("value")) for r in rules for m in r.get("matches", [])]
        backends = [(b.get("name"), b.get("port")) for r in rules for b in r.get("backendRefs", [])]
        check(f"the HTTPRoute {route['metadata']['name']} matches {path} ({match}) only, to {service}",
              paths == [(match, path)] and backends and all(n == service and p in ports for n, p in backends),
              f"{paths} -> {backends}")


def operator_checks(documents, sources, worker_config, created, users_example):
    """The operator's pod (operator.yaml): no replica until needed, its own ConfigMap and Secret, the workers'
    apps, ledger, topics, group and brokers, a Kafka user of its own whose ACLs let the runbook's commands run."""
    deployment = next((d for d in documents["Deployment"] if d["metadata"]["name"] == "receipt-worker-operator"), None)
    check("a Deployment of the operator's pod (receipt-worker-operator)", deployment is not None)
    if deployment is None:
        return
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    check("the operator's pod has no replica until an operator scales it (replicas: 0)",
          deployment["spec"].get("replicas") == 0, deployment["spec"].get("replicas"))
    check("the operator's container waits for commands (sleep) and runs nothing of its own",
          container.get("command", [])[:1] == ["sleep"], container.get("command"))
    maps = {d["metadata"]["name"]: d for d in documents["ConfigMap"]}
    path = tool_config(pod, container, maps)
    text = mounted_file(pod, container, path, maps) if path else None
    check("the operator's pod mounts its own configuration (operator.properties)",
          path is not None and path.endswith("/operator.properties") and text is not None, path)
    config = effective_config(text, container, documents["ConfigMap"])
    secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    check("the operator's pod mounts one Secret, receipt-worker-operator", secrets == {"receipt-worker-operator"},
          sorted(secrets))
    shared = [k for k in set(config) | set(worker_config) if k.startswith(("topics.", "apps.")) or k in (
        "apple.bundle_id", "apple.app_apple_id", "apple.allow_sandbox", "apple.api.key_id", "apple.api.issuer_id",
        "kafka.bootstrap.servers", "kafka.security.protocol", "kafka.sasl.mechanisms", "kafka.group.id")
        or k.startswith("ledger.") and k not in ("ledger.url", "ledger.url_file", "ledger.pool_size")]
    differ = [f"{k}: {config.get(k)} vs {worker_config.get(k)}" for k in sorted(shared)
              if config.get(k) != worker_config.get(k) and not k.endswith("_file")]
    check("operator.properties agrees with the workers' on the apps, the ledger, the topics, the group and the brokers",
          not differ, differ)
    secret = created.get("receipt-worker-operator", {})
    check(f"the operator's Secret ({SECRETS_SCRIPT}) holds the workers' ledger URL (not the owner's) and its own "
          "Kafka password", secret.get("ledger-url") == created.get("receipt-worker", {}).get("ledger-url")
          and secret.get("kafka-password") and secret.get("kafka-password") not in [
              keys.get("kafka-password") or keys.get("password") for name, keys in created.items()
              if name != "receipt-worker-operator"], sorted(secret))
    user = config.get("kafka.sasl.username")
    check("the operator's Kafka user is its own", user and user != worker_config.get("kafka.sasl.username"), user)
    if not users_example:
        return
    users = {d["metadata"]["name"]: d for d in sources.get("kafka-users-example.yaml", [])}
    acls = users.get(user, {}).get("spec", {}).get("authorization", {}).get("acls", [])
    allowed = {(a["resource"]["type"], a["resource"].get("name"), a["resource"].get("patternType", "literal"), op)
               for a in acls for op in a["operations"]}
    topics = {k: config.get(f"topics.{k}") for k in ("jobs", "results", "dlq", "notifications", "consumption", "retries")}
    group = config.get("kafka.group.id")
    # What each command of the runbook needs (Sources/ReceiptWorkerCLI): dlq replay reads the DLQ and writes each
    # letter back (jobs, consumption, notifications); rewind-group and accept-offsets read and commit the group's
    # offsets of the topics the workers read; credit writes results; backfill writes notifications.
    needed = {("topic", topics["dlq"], "literal", "Read")}
    needed |= {("topic", topics[k], "literal", "Write") for k in ("jobs", "consumption", "notifications", "results")}
    needed |= {("topic", topics[k], "literal", "Read") for k in ("jobs", "consumption", "notifications", "retries")}
    needed |= {("group", group, "literal", "Read"), ("group", group, "literal", "Describe"),
               ("group", "receipt-worker-tool-", "prefix", "Read"), ("cluster", None, "literal", "IdempotentWrite")}
    needed |= {("topic", t, "literal", "Describe") for t in topics.values()}
    check(f"kafka-users-example.yaml: the operator's user ({user}) may do what the runbook's commands do",
          needed <= allowed, sorted(needed - allowed, key=str))


def pods_and_labels(rendered):
    """Every pod mounts no API token, whatever ServiceAccount it runs as, and carries the deployment's labels:
    app.kubernetes.io/part-of (the runbook selects all of them by it), name and component (one role each)."""
    for workload in (d for d in rendered if d["kind"] in WORKLOAD_KINDS):
        template = pod_template(workload)
        name = f"the {workload['kind']} {workload['metadata']['name']}"
        check(f"{name}'s pods mount no API token (automountServiceAccountToken: false on the pod)",
              template["spec"].get("automountServiceAccountToken") is False)
        labels = template.get("metadata", {}).get("labels", {})
        check(f"{name}'s pods carry app.kubernetes.io/part-of, name and component",
              labels.get("app.kubernetes.io/part-of") == "receipt-worker" and labels.get("app.kubernetes.io/name")
              and labels.get("app.kubernetes.io/component"), labels)


CHECKOV_EXCEPTIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkov-exceptions.yaml")


def checkov(rendered_by):
    """checkov's Kubernetes policies on every rendered combination (one run over a file per combination). Each
    finding is printed per combination; one that Tests/deploy/checkov-exceptions.yaml lists (for every resource, or
    for the resources it names) is an exception with its reason, any other fails."""
    binary = os.path.join(root, ".deps", "checkov", "bin", "checkov")
    if not os.path.exists(binary):
        check("checkov is installed (bash scripts/setup.sh: .deps/checkov)", False)
        return
    exceptions = yaml.safe_load(open(CHECKOV_EXCEPTIONS)) or {}
    check("every checkov exception gives its reason", all(e.get("reason") for e in exceptions.values()),
          sorted(k for k, e in exceptions.items() if not e.get("reason")))
    with tempfile.TemporaryDirectory() as folder:
        files = {}
        for index, (name, rendered) in enumerate(rendered_by.items()):
            files[f"combination-{index}.yaml"] = name
            with open(os.path.join(folder, f"combination-{index}.yaml"), "w") as f:
                yaml.safe_dump_all(rendered, f)
        # Offline: no download of Prisma Cloud's guidelines, no version check.
        environment = dict(os.environ, BC_SKIP_MAPPING="TRUE", CHECKOV_RUN_SCA_PACKAGE_SCAN_V2="false",
                           BC_API_KEY="", CKV_IGNORE_HIDDEN_DIRECTORIES="true")
        run = subprocess.run([binary, "--directory", folder, "--framework", "kubernetes", "--output", "json",
                              "--compact", "--skip-download"], capture_output=True, text=True,
                             env=environment)
        try:
            reports = json.loads(run.stdout)
        except json.JSONDecodeError:
            check("checkov runs", False, (run.stdout + run.stderr)[-800:])
            return
    reports = reports if isinstance(reports, list) else [reports]
    results = [r for report in reports for r in report.get("results", {}).get("failed_checks", [])]
    passed = sum(len(report.get("results", {}).get("passed_checks", [])) for report in reports)
    used = set()
    global scope
    for file, name in files.items():
        scope = name
        found = [r for r in results if os.path.basename(r["file_path"]) == file]
        ran = sum(1 for report in reports for r in report.get("results", {}).get("passed_checks", [])
                  if os.path.basename(r["file_path"]) == file) + len(found)
        findings = []
        for result in sorted(found, key=lambda r: (r["check_id"], r["resource"])):
            kind, _, resource = result["resource"].partition(".")
            resource = resource.rpartition(".")[2] if resource.count(".") else resource
            exception = exceptions.get(result["check_id"])
            if exception and (not exception.get("resources") or f"{kind}/{resource}" in exception["resources"]):
                used.add(result["check_id"])
                print(f"      [{name}] checkov {result['check_id']} {kind}/{resource}: an exception (below)")
            else:
                findings.append(f"{result['check_id']} {kind}/{resource} ({result['check_name']})")
        check(f"checkov's Kubernetes policies pass ({ran} checks run; no finding but the listed exceptions)",
              ran > 0 and not findings, findings)
    scope = ""
    for check_id, exception in sorted(exceptions.items()):
        where = ", ".join(exception.get("resources", [])) or "every resource"
        print(f"      checkov exception {check_id} ({where}): {' '.join(exception['reason'].split())}")
    check(f"every exception in Tests/deploy/checkov-exceptions.yaml is still needed (checkov {passed} passed)",
          set(exceptions) <= used, sorted(set(exceptions) - used))


# What the image has (deploy/Dockerfile's runtime stage: debian:bookworm-slim, its Essential packages, and the
# packages it installs): the runbook may run these in a pod, and nothing else. No curl, no wget, no jq, no psql.
IMAGE_PACKAGES = ["ca-certificates", "libcurl4", "libssl3", "libsqlite3-0", "libpq5", "libmicrohttpd12", "zlib1g",
                  "libzstd1", "liblz4-1", "libjemalloc2"]
IMAGE_TOOLS = {"receipt-worker", "sh", "bash", "dash", "cat", "ls", "env", "sleep", "timeout", "echo", "printf", "head",
               "tail", "grep", "sed", "awk", "date", "id", "test", "true", "wc", "sort", "find", "tar", "gzip",
               "openssl"}  # openssl: a dependency of ca-certificates


def runbook_commands(rendered, rendered_by):
    """The kubectl commands of docs/runbook.md and deploy/README.md, checked against the manifests rendered with
    every role: each workload they name exists; `exec` runs only what the image has, and receipt-worker with a
    configuration the pod mounts; a label selector selects pods; `logs -l` reads every line (--tail=-1), not the
    last 10 of each pod; `port-forward` reaches a port the pod has; nothing scales a Deployment KEDA owns (KEDA would
    undo it: its pause annotation does it); no curl reaches a pod's port but through a port-forward."""
    dockerfile = open(os.path.join(deploy, "Dockerfile")).read()
    runtime = dockerfile[dockerfile.rindex("FROM debian:bookworm-slim"):]
    installed = re.search(r"--no-install-recommends\s+\\\n\s+(.+?)\s+\\\n", runtime, re.S)
    check("the image installs the packages the runbook's tool list is written for (no curl, no jq)",
          installed and installed.group(1).split() == IMAGE_PACKAGES, installed and installed.group(1))
    # Every other list of the runtime packages names the same ones: the release's clean root, the image made on
    # this machine (plus passwd, for its user), and the install instructions.
    release = re.search(r"runtime_packages=\(([^)]*)\)", open(os.path.join(root, "scripts", "release.sh")).read())
    image = re.search(r"^packages=(\S+)$", open(os.path.join(root, "scripts", "image.sh")).read(), re.M)
    releasing = open(os.path.join(root, "docs", "releasing.md")).read()
    clean_root = re.search(r"`(ca-certificates [^`]+)`", releasing)
    install = re.search(r"^apt-get install (.+)$", releasing, re.M)
    lists = {
        "scripts/release.sh": release and release.group(1).split(),
        "scripts/image.sh": image and [p for p in image.group(1).split(",") if p != "passwd"],
        "docs/releasing.md (the clean root)": clean_root and clean_root.group(1).split(),
        "docs/releasing.md (apt-get install)": install and install.group(1).split(),
    }
    check("the release, the image made here and docs/releasing.md list the image's runtime packages",
          all(v == IMAGE_PACKAGES for v in lists.values()), {k: v for k, v in lists.items() if v != IMAGE_PACKAGES})
    deployments = {d["metadata"]["name"]: d for d in rendered if d["kind"] in ("Deployment", "Job")}
    scaled = {s["spec"]["scaleTargetRef"]["name"] for s in rendered if s["kind"] == "ScaledObject"}
    templates = [pod_template(d).get("metadata", {}).get("labels", {}) for d in rendered if d["kind"] in WORKLOAD_KINDS]
    config_maps = {d["metadata"]["name"]: d for d in rendered if d["kind"] == "ConfigMap"}
    commands = []
    for page in (os.path.join(root, "docs", "runbook.md"), os.path.join(deploy, "README.md")):
        text = open(page).read()
        spans = re.findall(r"`(kubectl [^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        blocks = [line for block in re.findall(r"```(?:sh|bash)?\n(.*?)```", text, re.S)
                  for line in block.replace("\\\n", " ").splitlines() if line.strip().startswith("kubectl ")]
        commands += [(os.path.relpath(page, root), " ".join(c.split())) for c in spans + blocks]
    check("the runbook's and the deploy README's kubectl commands are read (at least 20)", len(commands) >= 20,
          len(commands))
    curls = []
    for page in (os.path.join(root, "docs", "runbook.md"), os.path.join(deploy, "README.md")):
        for number, line in enumerate(open(page), 1):
            for url in re.findall(r"curl[^`|]*?(https?://[^\s`'\"]+|\b[A-Z_]+:\d+/\S*)", line):
                if not re.match(r"https?://(127\.0\.0\.1|localhost)[:/]|https://", url):
                    curls.append(f"{os.path.relpath(page, root)}:{number}: {url}")
    check("no curl reaches a pod's port directly (the NetworkPolicy drops it): through kubectl port-forward, "
          "to 127.0.0.1", not curls, curls)
    for page, command in commands:
        words = command.split()
        problems = []
        # Commands in another namespace (KEDA's, the Kafka cluster's) are not about these manifests.
        namespace = words[words.index("-n") + 1] if "-n" in words else None
        if namespace not in (None, "NAMESPACE", "receipt-worker", "receipt-worker-review"):
            continue
        target = next((w for i, w in enumerate(words) if re.fullmatch(r"(deploy|deployment|job)/[a-z0-9-]+", w)
                       and words[i - 1] not in ("-k", "-f", "kustomize")), None)
        if target:
            name = target.split("/", 1)[1]
            if name not in deployments:
                problems.append(f"no {target} in the manifests")
        if "exec" in words and "--" in words:
            tool = words[words.index("--") + 1]
            if tool not in IMAGE_TOOLS:
                problems.append(f"{tool} is not in the image")
            config = words[words.index("--config") + 1] if "--config" in words else None
            if tool == "receipt-worker" and target and target.split("/", 1)[1] in deployments:
                pod = pod_template(deployments[target.split("/", 1)[1]])["spec"]
                if config is None or mounted_file(pod, pod["containers"][0], config, config_maps) is None:
                    problems.append(f"--config {config} is not a file the pod mounts")
        for selector in re.findall(r"(?:-l|--selector)[ =](\S+)", command):
            pairs = dict(p.split("=", 1) for p in selector.split(",") if "=" in p)
            if not any(all(labels.get(k) == v for k, v in pairs.items()) for labels in templates):
                problems.append(f"-l {selector} selects no pod")
            if words[:4].count("logs") or "logs" in words:
                if "--tail=-1" not in words:
                    problems.append("logs -l reads the last 10 lines of each pod unless --tail=-1")
        if "port-forward" in words:
            ports = [w for w in words if re.fullmatch(r"\d+:\d+|\d+", w)]
            if target and target.split("/", 1)[1] in deployments:
                pod = pod_template(deployments[target.split("/", 1)[1]])["spec"]
                have = {p["containerPort"] for c in pod["containers"] for p in c.get("ports", [])}
                if not ports or int(ports[0].split(":")[-1]) not in have:
                    problems.append(f"port {ports} is not a port of {target} ({sorted(have)})")
        if "scale" in words and target and target.split("/", 1)[1] in scaled:
            problems.append("KEDA owns this Deployment's replicas and would undo a scale: pause the ScaledObject")
        check(f"{page}: `{command[:110]}`", not problems, problems)


def receiver_checks(documents, sources, worker_config, created, keda_user, users_example):
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
    config = effective_config(receiver_map["data"]["receiver.properties"], container, documents["ConfigMap"])
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
    secret = created.get("receipt-worker-receiver", {})
    check(f"the receivers' Secret ({SECRETS_SCRIPT}) holds only the Kafka password and the brokers' CA",
          secret and set(secret) <= {"kafka-password", "kafka-ca.crt"}, sorted(secret))
    passwords = {name: keys.get("kafka-password") or keys.get("password") for name, keys in created.items()}
    check(f"the receivers' Kafka password ({SECRETS_SCRIPT}) is not the workers' or KEDA's",
          secret and list(passwords.values()).count(secret.get("kafka-password")) == 1, sorted(passwords))
    check("the receivers' Kafka user is not the workers'",
          config.get("kafka.sasl.username") != worker_config.get("kafka.sasl.username"), config.get("kafka.sasl.username"))
    for key in ("apple.bundle_id", "apple.app_apple_id", "apple.allow_sandbox", "topics.notifications",
                "kafka.bootstrap.servers", "kafka.security.protocol"):
        check(f"receiver.properties agrees with worker.properties on {key}", config.get(key) == worker_config.get(key),
              f"{config.get(key)} vs {worker_config.get(key)}")
    check("the receiver's args read receiver.properties", any(a.endswith("receiver.properties") for a in container["args"]))
    if not users_example:
        return  # an overlay's users are its own (kafka-users-example.yaml's, renamed)
    # Users as a Strimzi example: the receiver's may write the notifications topic and nothing else.
    users = {d["metadata"]["name"]: d for d in sources.get("kafka-users-example.yaml", [])}
    receiver_acls = users.get(config.get("kafka.sasl.username"), {}).get("spec", {}).get("authorization", {}).get("acls", [])
    writes = {a["resource"].get("name") for a in receiver_acls if "Write" in a["operations"] or "Read" in a["operations"]}
    check("kafka-users-example.yaml: the receivers' user may write the notifications topic and read or write nothing else",
          writes == {config.get("topics.notifications")}, sorted(w or "" for w in writes))
    keda = users.get(keda_user, {}).get("spec", {}).get("authorization", {}).get("acls", [])
    check(f"kafka-users-example.yaml: KEDA's user ({keda_user}, its Secret's username) may only describe",
          keda and all(a["operations"] == ["Describe"] for a in keda), keda)


def security_contexts(rendered):
    """Every workload runs as the namespace's restricted Pod Security Standard requires, with what it asks of a
    node stated: non-root, RuntimeDefault seccomp, no privilege escalation, every capability dropped, a read-only
    root, a CPU and memory request and a memory limit."""
    for workload in (d for d in rendered if d["kind"] in WORKLOAD_KINDS):
        pod = pod_template(workload)["spec"]
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            context = container.get("securityContext", {})
            resources = container.get("resources", {})
            problems = [what for what, ok in [
                ("runAsNonRoot", pod.get("securityContext", {}).get("runAsNonRoot") is True),
                ("seccomp RuntimeDefault", pod.get("securityContext", {}).get("seccompProfile", {}).get("type")
                 == "RuntimeDefault"),
                ("allowPrivilegeEscalation: false", context.get("allowPrivilegeEscalation") is False),
                ("capabilities drop ALL", context.get("capabilities", {}).get("drop") == ["ALL"]),
                ("readOnlyRootFilesystem", context.get("readOnlyRootFilesystem") is True),
                ("cpu and memory requests", {"cpu", "memory"} <= set(resources.get("requests", {}))),
                ("a memory limit", "memory" in resources.get("limits", {}))] if not ok]
            check(f"the {workload['kind']} {workload['metadata']['name']} ({container['name']}) runs restricted, "
                  "with requests and a memory limit", not problems, problems)


def desk_checks(documents, sources, worker_config, created, users_example):
    """The support desk (desk.yaml): its own ConfigMap and Secret and nothing else, every key `desk` requires, the
    workers' apps, ledger keys and brokers, its own Kafka user (which may only write the results topic) and
    PostgreSQL role, probes on the metrics port, a Service, a policy that admits only the ingress controller (to
    the desk's port) and Prometheus (to metrics), and an example Ingress that publishes only /desk over TLS on the
    host of desk.public_url."""
    deployment = next((d for d in documents["Deployment"]
                       if d["spec"]["template"]["spec"]["containers"][0].get("args", [])[:1] == ["desk"]), None)
    check("a Deployment of the support desk (receipt-worker desk)", deployment is not None)
    if deployment is None:
        return
    name = deployment["metadata"]["name"]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    check("the desk runs two replicas or more (no state of its own: sessions are sealed cookies)",
          deployment["spec"].get("replicas", 1) >= 2, deployment["spec"].get("replicas"))
    desk_map = next((d for d in documents["ConfigMap"] if "desk.properties" in d.get("data", {})), None)
    check("a ConfigMap of the desk's own (desk.properties)", desk_map is not None)
    if desk_map is None:
        return
    config = effective_config(desk_map["data"]["desk.properties"], container, documents["ConfigMap"])
    check("the desk's args read desk.properties", any(a.endswith("desk.properties") for a in container["args"]))
    maps = {v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
    check("the desk mounts only its own ConfigMap", maps == {desk_map["metadata"]["name"]}, sorted(maps))
    secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    secrets |= {s.get("secret", {}).get("name") for v in pod["volumes"] for s in v.get("projected", {}).get("sources", [])
                if "secret" in s}
    secrets |= {e["valueFrom"]["secretKeyRef"]["name"] for c in pod["containers"] for e in c.get("env", [])
                if "secretKeyRef" in e.get("valueFrom", {})}
    check("the desk mounts one Secret, receipt-worker-desk, and no other", secrets == {"receipt-worker-desk"},
          sorted(secrets))
    missing = [k for k in DESK_REQUIRED if not config.get(k)]
    check("desk.properties sets every key `receipt-worker desk` requires", not missing, missing)
    granting = [k for k in config if k.startswith(("apple.shared_secret", "notifications.listen"))
                or k.startswith("apps.") and "shared_secret" in k]
    check("desk.properties names no shared secret and serves no notifications", not granting, granting)
    secret = created.get("receipt-worker-desk", {})
    allowed = {"app-store-key.p8", "ledger-url", "kafka-password", "kafka-ca.crt", "oidc-client-secret", "session-key",
               "erasure-key", "postgres-ca.crt"}
    check(f"the desk's Secret ({SECRETS_SCRIPT}) holds only its key, ledger URL, Kafka password, CAs, client secret, "
          "session and erasure keys", secret and set(secret) <= allowed, sorted(secret))
    check("desk.properties names the erasure key a lead's Erase needs (privacy.erasure_key_file), from its Secret",
          config.get("privacy.erasure_key_file") == SECRETS_ROOT + "receipt-worker-desk/erasure-key"
          and "erasure-key" in secret, config.get("privacy.erasure_key_file"))
    workers = created.get("receipt-worker", {})
    check(f"the desk's ledger URL ({SECRETS_SCRIPT}) is a role of its own: not the workers' nor the owner's",
          secret.get("ledger-url") and secret.get("ledger-url") not in (
              workers.get("ledger-url"), created.get("receipt-worker-migrate", {}).get("ledger-migrate-url")),
          "the same URL")
    passwords = [keys.get("kafka-password") or keys.get("password") for keys in created.values()]
    check(f"the desk's Kafka password ({SECRETS_SCRIPT}) is its own",
          secret.get("kafka-password") and passwords.count(secret.get("kafka-password")) == 1)
    users = [worker_config.get("kafka.sasl.username")] + [
        effective_config(d["data"][f], c, documents["ConfigMap"]).get("kafka.sasl.username")
        for d in documents["ConfigMap"] for f in d.get("data", {}) if f.endswith(".properties") and f != "desk.properties"
        for w in documents["Deployment"] for c in w["spec"]["template"]["spec"]["containers"]
        if d["metadata"]["name"] in {v.get("configMap", {}).get("name") for v in w["spec"]["template"]["spec"]["volumes"]}]
    check("the desk's Kafka user is its own (not the workers' or the receivers')",
          config.get("kafka.sasl.username") and config.get("kafka.sasl.username") not in users,
          config.get("kafka.sasl.username"))
    if users_example:
        kafka_users = {d["metadata"]["name"]: d for d in sources.get("kafka-users-example.yaml", [])}
        acls = kafka_users.get(config.get("kafka.sasl.username"), {}).get("spec", {}).get("authorization", {}).get("acls", [])
        touched = {a["resource"].get("name") for a in acls if {"Write", "Read"} & set(a["operations"])}
        check("kafka-users-example.yaml: the desk's user may write the results topic and read or write nothing else",
              touched == {config.get("topics.results", "receipt-results")}, sorted(t or "" for t in touched))
    shared = sorted(k for k in set(config) | set(worker_config) if k in (
        "apple.bundle_id", "apple.app_apple_id", "apple.allow_sandbox", "apple.api.issuer_id", "topics.results",
        "kafka.bootstrap.servers", "kafka.security.protocol", "kafka.sasl.mechanisms", "kafka.group.id")
        or k.startswith("apps.") and not k.endswith(("_file", "shared_secret"))
        or k.startswith("ledger.") and k not in ("ledger.url", "ledger.url_file", "ledger.pool_size",
                                                 "ledger.ssl_root_cert_file"))
    differ = [f"{k}: {config.get(k)} vs {worker_config.get(k)}" for k in shared if config.get(k) != worker_config.get(k)]
    check("desk.properties agrees with worker.properties on the apps, the ledger's keys, the results topic and the "
          "brokers", not differ, differ)

    # Ports and probes.
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    listen = config.get("desk.listen", ":0")
    metrics = config.get("metrics.listen", ":0")
    check("the desk's port is desk.listen's, its metrics port metrics.listen's",
          ports.get("desk") == int(listen.rsplit(":", 1)[1]) and ports.get("metrics") == int(metrics.rsplit(":", 1)[1]),
          f"{ports} vs {listen}, {metrics}")
    probes = {kind: container.get(kind, {}).get("httpGet", {}) for kind in ("livenessProbe", "readinessProbe")}
    check("the desk's liveness is /healthz and its readiness /readyz, on the metrics port",
          probes["livenessProbe"].get("path") == "/healthz" and probes["readinessProbe"].get("path") == "/readyz"
          and all(p.get("port") in ("metrics", ports.get("metrics")) for p in probes.values()), probes)
    services = [s for s in documents["Service"] if selects({"matchLabels": s["spec"].get("selector", {})}, labels)]
    desk_service = next((s for s in services if any(p.get("targetPort") in ("desk", ports.get("desk"))
                                                     for p in s["spec"].get("ports", []))), None)
    check("a ClusterIP Service forwards to the desk's port",
          desk_service is not None and desk_service["spec"].get("type", "ClusterIP") == "ClusterIP"
          and desk_service["spec"].get("clusterIP") != "None", [s["metadata"]["name"] for s in services])

    # The NetworkPolicy: in from the ingress controller to the desk's port and from Prometheus to metrics; out to
    # DNS, HTTPS (Apple, the provider), PostgreSQL and the brokers.
    policies = [p for p in documents["NetworkPolicy"] if selects(p["spec"].get("podSelector", {}), labels)]
    check("one NetworkPolicy selects the desk's pods", len(policies) == 1, [p["metadata"]["name"] for p in policies])
    if policies:
        policy = policies[0]["spec"]
        check("the desk's policy restricts both directions", sorted(policy.get("policyTypes", [])) == ["Egress", "Ingress"])
        ingress = policy.get("ingress", [])
        by_port = {}
        for rule in ingress:
            for port in rule.get("ports", []):
                number = ports.get(port["port"], port["port"])
                by_port.setdefault(number, []).extend(
                    (f.get("namespaceSelector", {}).get("matchLabels", {}).get("kubernetes.io/metadata.name"),
                     f.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/name"))
                    for f in rule.get("from", []))
        open_rules = [r for r in ingress if not r.get("from") or not r.get("ports")]
        check("every ingress rule of the desk's policy names its sources and ports", not open_rules, open_rules)
        check("the desk is reached only on its port (from the ingress controller) and metrics (from Prometheus)",
              set(by_port) == {ports.get("desk"), ports.get("metrics")}
              and all(app == "ingress-nginx" for _, app in by_port.get(ports.get("desk"), []))
              and all(app == "prometheus" for _, app in by_port.get(ports.get("metrics"), [])), by_port)
        allowed_out = {(p.get("protocol", "TCP"), p["port"]) for rule in policy.get("egress", [])
                       for p in rule.get("ports", [])}
        kafka_ports = {int(b.rsplit(":", 1)[1]) for b in config["kafka.bootstrap.servers"].split(",")}
        needed = {("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 80), ("TCP", 5432)} | {("TCP", p) for p in kafka_ports}
        check("the desk's egress allows DNS, HTTPS (Apple, the provider), PostgreSQL and the brokers",
              needed <= allowed_out, sorted(needed - allowed_out))
        check("every egress rule of the desk's policy names its ports", all(r.get("ports") for r in policy.get("egress", [])))

    # The example Ingress: /desk of the desk's Service, on desk.public_url's host, over TLS, and nothing else.
    ingresses = [d for d in sources.get("desk-ingress-example.yaml", []) if d.get("kind") == "Ingress"]
    check("desk-ingress-example.yaml has an Ingress", len(ingresses) == 1, len(ingresses))
    host = re.sub(r"^https?://", "", config.get("desk.public_url", "")).split(":")[0].rstrip("/")
    check("desk.public_url is https (the session cookie is Secure and __Host-)",
          config.get("desk.public_url", "").startswith("https://"), config.get("desk.public_url"))
    service_ports = {p.get("name"): p.get("port") for p in (desk_service or {}).get("spec", {}).get("ports", [])}
    for ingress in ingresses:
        spec = ingress["spec"]
        routes = [(rule.get("host"), path) for rule in spec.get("rules", [])
                  for path in rule.get("http", {}).get("paths", [])]
        good = [(h, p) for h, p in routes if p.get("path") == DESK_PATH and p.get("pathType") == "Prefix"
                and p["backend"]["service"]["name"] == (desk_service or {}).get("metadata", {}).get("name")
                and (p["backend"]["service"]["port"].get("name") in service_ports
                     or p["backend"]["service"]["port"].get("number") in service_ports.values())]
        check(f"the desk's example Ingress routes {DESK_PATH} (Prefix) to the desk's Service, and nothing else",
              good and len(good) == len(routes), routes)
        tls_hosts = {h for entry in spec.get("tls", []) for h in entry.get("hosts", [])}
        check("the desk's example Ingress serves desk.public_url's host, over TLS",
              good and all(h == host and h in tls_hosts for h, _ in good), f"{host} vs {routes} and TLS {tls_hosts}")
    routes = [d for d in sources.get("desk-httproute-example.yaml", []) if d.get("kind") == "HTTPRoute"]
    http_routes(routes, (desk_service or {}).get("metadata", {}).get("name"), list(service_ports.values()), DESK_PATH,
                "PathPrefix")
    check("the desk's example HTTPRoute serves desk.public_url's host",
          routes and all(r["spec"].get("hostnames") == [host] for r in routes), [r["spec"].get("hostnames") for r in routes])


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


# PromQL's aggregation operators that drop labels (topk and bottomk keep each series' labels: not here).
AGGREGATIONS = {"sum", "min", "max", "avg", "count", "group", "stddev", "stdvar", "quantile", "count_values"}
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
PROMQL_KEYWORDS = LABEL_LIST_KEYWORDS | {"and", "or", "unless", "bool", "offset", "inf", "nan"}
PROMQL_TOKEN = re.compile(r"""\s+|#[^\n]*|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`|\[[^\]]*\]|@|"""
                          r"""[A-Za-z_:][A-Za-z0-9_:]*|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|=~|!~|!=|==|>=|<=|[(){},=<>+\-*/%^]""")
# Series read from the fleet: the worker's own families and the scrape jobs' `up`. A rule reading one selects
# its job (workers: receipt-worker, receivers: receipt-worker-receiver; both export receipt_worker_ready).
FLEET_SERIES = re.compile(r"^(receipt_worker_\w+|up)$")


def promql_tokens(expr):
    """The tokens of a PromQL expression: strings, ranges ([5m]) and comments whole; spaces dropped."""
    tokens, position = [], 0
    while position < len(expr):
        match = PROMQL_TOKEN.match(expr, position)
        if not match:
            raise ValueError(f"cannot read PromQL at {expr[position:position + 20]!r}")
        text = match.group(0)
        if not text.isspace() and not text.startswith("#"):
            tokens.append(text)
        position = match.end()
    return tokens


def closing(tokens, start):
    """The index of the bracket closing the one at `start`."""
    pairs = {"(": ")", "{": "}"}
    depth = 0
    for index in range(start, len(tokens)):
        if tokens[index] == tokens[start]:
            depth += 1
        elif tokens[index] == pairs[tokens[start]]:
            depth -= 1
            if depth == 0:
                return index
    raise ValueError(f"unbalanced {tokens[start]}")


def promql_scan(expr):
    """(aggregations, selectors) of a PromQL expression: each aggregation as (operator, "by"/"without"/None,
    [labels], its text), each selector as (metric, [label names matched]). A careful scan, not a parser: label
    lists (by, on, group_left, ...) and matchers are read as such, so a label called `group` is not taken for
    the operator."""
    tokens = promql_tokens(expr)
    aggregations, selectors = [], []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if token in LABEL_LIST_KEYWORDS and following == "(":
            index = closing(tokens, index + 1) + 1
            continue
        if token == "{":
            index = closing(tokens, index) + 1
            continue
        if token in AGGREGATIONS and following in ("(", "by", "without"):
            grouping, labels, position = None, [], index + 1
            if tokens[position] in ("by", "without"):
                grouping = tokens[position]
                end = closing(tokens, position + 1)
                labels = [t for t in tokens[position + 2:end] if t != ","]
                position = end + 1
            end = closing(tokens, position)
            if grouping is None and end + 1 < len(tokens) and tokens[end + 1] in ("by", "without"):
                grouping = tokens[end + 1]
                labels = [t for t in tokens[end + 3:closing(tokens, end + 2)] if t != ","]
            text = re.sub(r"\s*([(){},]|=~|!~|!=|=)\s*", r"\1", " ".join(tokens[index:end + 1]))
            aggregations.append((token, grouping, labels, re.sub(r",", ", ", text)[:100]))
            index += 1
            continue
        if re.match(r"^[A-Za-z_:]", token) and token not in PROMQL_KEYWORDS and following != "(":
            matched = []
            if following == "{":
                end = closing(tokens, index + 1)
                matched = [tokens[i] for i in range(index + 2, end) if tokens[i + 1] in ("=", "!=", "=~", "!~")]
            selectors.append((token, matched))
        index += 1
    return aggregations, selectors


# Prometheus 3 normalises the bound of a histogram on ingestion (le="5" is stored as le="5.0"; "0.5" and "+Inf"
# stay), Prometheus 2 keeps the exporter's spelling: a selector on a whole-number bound must match both.
LE_MATCHER = re.compile(r'\ble\s*(=~|=|!=|!~)\s*"([^"]*)"')


def bound_spellings(value):
    """The two spellings of a bound: as the worker exports it and as Prometheus 3 stores it."""
    number = float(value)
    exported = str(int(number)) if number.is_integer() else value
    return {exported, f"{number:.1f}" if number.is_integer() else value}


def bound_problems(expr):
    """Each `le` matcher of an expression that does not select both spellings of its bound."""
    problems = []
    for operator, value in LE_MATCHER.findall(expr):
        if operator in ("!=", "!~"):
            problems.append(f'le{operator}"{value}"')
            continue
        pattern = value.replace("\\\\", "\\") if operator == "=~" else re.escape(value)
        bounds = {b for alternative in re.split(r"(?<!\\)\|", value) for b in
                  ([alternative.replace("\\\\.", ".").replace("\\.", ".")] if operator == "=~" else [value])}
        wanted = set()
        for bound in bounds:
            try:
                wanted |= bound_spellings(bound)
            except ValueError:
                wanted.add(bound)
        if not all(re.fullmatch(pattern, spelling) for spelling in wanted):
            problems.append(f'le{operator}"{value}" misses one of {sorted(wanted)}')
    return problems


def rule_scope_problems(path):
    """{rule name: [what is wrong]}: an aggregation that does not keep `namespace` (a bare one, a `by` without it,
    a `without` dropping it), or a fleet series read without selecting its job."""
    problems = {}
    for group in yaml.safe_load(open(path))["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert") or rule.get("record")
            aggregations, selectors = promql_scan(rule["expr"])
            found = []
            for operator, grouping, labels, text in aggregations:
                if grouping is None:
                    found.append(f"a bare {operator} (no by (namespace, ...)): {text}")
                elif (grouping == "by") != ("namespace" in labels):
                    found.append(f"{operator} {grouping} ({', '.join(labels)}) drops namespace: {text}")
            for metric, matched in selectors:
                if FLEET_SERIES.match(metric) and "job" not in matched:
                    found.append(f"{metric} read without selecting its job")
            if found:
                problems[name] = found
    return problems


def rule_scope(path):
    """Every rule keeps `namespace` in its aggregations and selects its job; and the check itself catches a
    rule broken in a temporary copy (a bare sum, a by without namespace, a trailing by, a without, a selector
    without its job), each of which promtool accepts."""
    problems = rule_scope_problems(path)
    check("every rule's aggregations keep namespace and every fleet series is read with its job",
          not problems, "; ".join(f"{name}: {', '.join(found)}" for name, found in sorted(problems.items())))
    breakages = {
        "ReceiptWorkerNoReadyReplica": ('max by (namespace) (receipt_worker_ready{job="receipt-worker"}) == 0',
                                        'sum(receipt_worker_ready{job="receipt-worker"}) == 0'),
        "ReceiptWorkerAppleErrors": ("sum by (namespace, app) (rate(receipt_worker_apple_request_duration_seconds_count{job=\"receipt-worker\",outcome",
                                     "sum by (app) (rate(receipt_worker_apple_request_duration_seconds_count{job=\"receipt-worker\",outcome"),
        "ReceiptWorkerLedgerSlow": ("sum by (namespace, instance, le) (rate(receipt_worker_stage_duration_seconds_bucket{job=\"receipt-worker\",stage=\"ledger_record\"}[5m]))",
                                    "sum(rate(receipt_worker_stage_duration_seconds_bucket{job=\"receipt-worker\",stage=\"ledger_record\"}[5m])) by (instance, le)"),
        "ReceiptWorkerDeadLetters": ("sum by (namespace, reason, group)", "sum without (namespace, instance)"),
        "ReceiptWorkerNotReady": ('max by (namespace, instance) (receipt_worker_ready{job="receipt-worker"})',
                                  "max by (namespace, instance) (receipt_worker_ready)"),
    }
    text = open(path).read()
    with tempfile.TemporaryDirectory() as folder:
        broken = os.path.join(folder, os.path.basename(path))
        for name, (before, after) in breakages.items():
            if text.count(before) < 1:
                check(f"the check's own test finds what it breaks in {name}", False, before)
                return
            text = text.replace(before, after, 1)
        with open(broken, "w") as f:
            f.write(text)
        if shutil.which("promtool"):
            run = subprocess.run(["promtool", "check", "rules", broken], capture_output=True, text=True)
            check("promtool accepts the broken copy (the scope check is what catches it)", run.returncode == 0,
                  (run.stdout + run.stderr)[-300:])
        caught = rule_scope_problems(broken)
        for name, found in sorted(caught.items()):
            print(f"      broken copy: {name}: {'; '.join(found)}")
        check("the scope check names each rule broken in a temporary copy, and only those",
              set(caught) == set(breakages), sorted(caught))
    # The scan reads a label called like an operator (group) as a label, and both places of a by clause.
    aggregations, _ = promql_scan('sum(rate(x{group="a"}[5m])) by (namespace, group) / on (group) count by (namespace) (y)')
    check("the scan reads `group` as a label, and a by clause before or after the operand",
          [(a[0], a[1], a[2]) for a in aggregations] == [("sum", "by", ["namespace", "group"]), ("count", "by", ["namespace"])],
          aggregations)


def prometheus():
    folder = os.path.join(deploy, "prometheus")
    path = os.path.join(folder, "receipt-worker-rules.yaml")
    groups = yaml.safe_load(open(path))["groups"]
    rules = [rule for group in groups for rule in group["rules"] if "alert" in rule]
    records = [rule for group in groups for rule in group["rules"] if "alert" not in rule]
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
    # Recording rules are named level:metric:operation, and never receipt_worker_...: the test that scrapes a
    # live worker reads every receipt_worker_ name in this file as one the worker must export.
    for rule in records:
        name = rule.get("record", "")
        check(f"recording rule {name} is named level:metric:operation, not receipt_worker_*",
              re.match(r"^[a-z_]+:[a-z_]+:[a-z0-9_]+$", name) is not None and "receipt_worker_" not in name
              and rule.get("expr"), rule)
        used = any(name in r["expr"] for r in rules)
        check(f"recording rule {name} is read by an alert or the dashboard",
              used or name in open(os.path.join(deploy, "grafana", "receipt-worker-dashboard.json")).read())
    check("alert names are unique", len({r["alert"] for r in rules}) == len(rules))
    misspelt = {r.get("alert") or r.get("record"): bound_problems(r["expr"]) for r in rules + records}
    misspelt = {name: found for name, found in misspelt.items() if found}
    check('every selector on a histogram bound matches both spellings (le="5" of Prometheus 2, le="5.0" of 3)',
          not misspelt, misspelt)
    # Self-test of the bound check on the spellings it must refuse and accept.
    check("the bound check refuses le=\"5\" and le=\"5.0\" alone and accepts both, and bounds that do not change",
          bound_problems('x{le="5"}') and bound_problems('x{le="5.0"}') and not bound_problems('x{le=~"5|5\\\\.0"}')
          and not bound_problems('x{le="0.5"}') and not bound_problems('x{le="+Inf"}'))
    desk_metrics(rules + records)
    rule_scope(path)
    if not shutil.which("promtool"):
        check("promtool is installed (scripts/setup.sh installs Debian's prometheus)", False)
        return
    run = subprocess.run(["promtool", "check", "rules", path], capture_output=True, text=True)
    check("promtool check rules passes", run.returncode == 0, (run.stdout + run.stderr)[-500:])
    tests = os.path.join(folder, "receipt-worker-rules.test.yaml")
    run = subprocess.run(["promtool", "test", "rules", os.path.basename(tests)], capture_output=True, text=True,
                         cwd=folder)
    check("promtool test rules passes", run.returncode == 0, (run.stdout + run.stderr)[-1500:])
    cases = yaml.safe_load(open(tests))["tests"]
    tested = {case["alertname"] for test in cases for case in test.get("alert_rule_test", []) if case.get("exp_alerts")}
    untested = sorted({r["alert"] for r in rules} - tested)
    check("every alert has a promtool test in which it fires", not untested, untested)
    quiet = {case["alertname"] for test in cases for case in test.get("alert_rule_test", []) if not case.get("exp_alerts")}
    check("the promtool tests also show alerts silent on the honest day beside them (at least half the alerts)",
          len(quiet) * 2 >= len(rules), sorted(quiet))
    # Each alert fires in a case with a second deployment beside the first (series of two namespaces), naming the
    # namespace it fires for: the neighbour that a rule without `namespace` would mix in or be hidden by.
    beside = set()
    for test in cases:
        namespaces = {m for s in test["input_series"] for m in re.findall(r'namespace="([^"]*)"', s["series"])}
        for case in test.get("alert_rule_test", []):
            expected = case.get("exp_alerts") or []
            if expected and len(namespaces) >= 2 and all(e["exp_labels"].get("namespace") for e in expected):
                beside.add(case["alertname"])
    # An alert that selects a histogram bound fires in a test fed each spelling of it (promtool 2.42 stores what
    # it is fed, as Prometheus 2 does; Prometheus 3's spelling is fed as it would store it).
    for rule in (r for r in rules if LE_MATCHER.search(r["expr"])):
        fed = set()
        for test in cases:
            spellings = {m for s in test["input_series"] for m in re.findall(r'\ble="([^"]*)"', s["series"])}
            if any(case["alertname"] == rule["alert"] and case.get("exp_alerts") for case in test.get("alert_rule_test", [])):
                fed |= {"5.0" if any(re.fullmatch(r"\d+\.0", m) for m in spellings) else "",
                        "5" if any(re.fullmatch(r"\d+", m) for m in spellings) else ""}
        check(f"{rule['alert']} fires in a promtool test fed the bound as Prometheus 2 spells it (le=\"5\") and in one "
              "fed Prometheus 3's (le=\"5.0\")", {"5", "5.0"} <= fed, sorted(fed - {""}))
    alone = sorted({r["alert"] for r in rules} - beside)
    check("every alert fires, naming its namespace, beside a second namespace's series in a promtool test",
          not alone, alone)
    recorded = {r["record"] for r in records}
    exercised = {name for test in cases for t in test.get("promql_expr_test", []) for name in recorded if name in t["expr"]}
    check("every recording rule's value is tested (promql_expr_test)", exercised == recorded, sorted(recorded - exercised))


def desk_metrics(rules):
    """The support desk's series (receipt_worker_desk_*) are not the worker's: MetricsEndpointTests, which checks the
    rules' metrics against a live worker's /metrics, leaves them to this check, against the desk's own registry
    (Sources/DeskService/DeskMetrics.swift): each name the rules read is one it registers, read from the desk's
    scrape job, and each reason a rule matches is one it counts."""
    source = open(os.path.join(root, "Sources", "DeskService", "DeskMetrics.swift")).read()
    registered = set(re.findall(r'"(receipt_worker_desk_[a-z_]+)"', source))
    listed = re.search(r"static let authReasons = \[(.*?)\]", source, re.S)
    reasons = set(re.findall(r'"([a-z_]+)"', listed.group(1))) if listed else set()
    for rule in rules:
        name = rule.get("alert") or rule.get("record")
        _, selectors = promql_scan(rule["expr"])
        read = [metric for metric, _ in selectors if metric.startswith("receipt_worker_desk_")]
        if not read:
            continue
        unknown = sorted(set(read) - registered)
        check(f"{name} reads only metrics the desk registers (DeskMetrics.swift)", not unknown, unknown)
        jobs = set(re.findall(r'receipt_worker_desk_\w+\{[^}]*job="([^"]+)"', rule["expr"]))
        check(f"{name} reads the desk's series from its scrape job (job=\"receipt-worker-desk\")",
              jobs == {"receipt-worker-desk"}, sorted(jobs))
        matched = {v for alternation in re.findall(r'reason=~?"([^"]+)"', rule["expr"]) for v in alternation.split("|")}
        check(f"{name} matches only reasons the desk counts (DeskMetrics.authReasons)",
              reasons and matched <= reasons, sorted(matched - reasons) or "no authReasons in DeskMetrics.swift")


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
    # The rules, once per Prometheus (monitoring/); the runbook's address is a setting of that kustomization.
    run = subprocess.run(["kubectl", "kustomize", folder], capture_output=True, text=True)
    monitored = [d for d in yaml.safe_load_all(run.stdout) if d] if run.returncode == 0 else []
    check("monitoring/ renders (the PrometheusRule)", [d["kind"] for d in monitored if d["kind"] != "ConfigMap"]
          == ["PrometheusRule"], run.stderr.strip() or [d["kind"] for d in monitored])
    validate_schemas(monitored, "deploy/kubernetes/monitoring")
    examples = [d for name in sorted(os.listdir(folder)) if name.endswith("-example.yaml")
                for d in yaml.safe_load_all(open(os.path.join(folder, name))) if d]
    validate_schemas(examples, "monitoring/*-example.yaml")
    settings = next((d for d in monitored if d["kind"] == "ConfigMap" and "runbook_base" in d.get("data", {})), None)
    base = settings["data"]["runbook_base"] if settings else "(none)"
    links = [r["annotations"]["runbook_url"] for d in monitored if d["kind"] == "PrometheusRule"
             for g in d["spec"]["groups"] for r in g["rules"] if "alert" in r]
    check("rendered, every runbook_url is the kustomization's runbook_base and the alert's section",
          links and all(link.startswith(base + "#receiptworker") for link in links),
          [link for link in links if not link.startswith(base + "#")][:3])
    # Each deployment's scraping (components/monitoring), rendered with every role: the ServiceMonitor selects the
    # workers' metrics Service, the PodMonitor the receivers' and the desk's pods, each named for its job
    # (app.kubernetes.io/name), which the rules select.
    with tempfile.TemporaryDirectory() as top:
        _, rendered = render_combination(top, None, ["components/desk", "components/monitoring"])
    services = [d for d in rendered if d["kind"] == "Service"]
    templates = [d["spec"]["template"]["metadata"]["labels"] for d in rendered if d["kind"] == "Deployment"]
    for d in (d for d in rendered if d["kind"] == "ServiceMonitor"):
        selector = d["spec"]["selector"]
        target = [s for s in services if selects(selector, s["metadata"].get("labels", {}))]
        check("the ServiceMonitor selects the workers' metrics Service and scrapes its port, job receipt-worker",
              len(target) == 1 and d["spec"]["endpoints"][0]["port"] in [p["name"] for p in target[0]["spec"]["ports"]]
              and target[0]["metadata"]["labels"].get(d["spec"].get("jobLabel")) == "receipt-worker",
              [s["metadata"]["name"] for s in target])
    scraped = {t.get("app.kubernetes.io/name") for d in rendered if d["kind"] == "PodMonitor"
               for t in templates if selects(d["spec"]["selector"], t) and d["spec"].get("jobLabel") == "app.kubernetes.io/name"
               and d["spec"]["podMetricsEndpoints"][0].get("port") == "metrics"}
    check("the PodMonitor scrapes the receivers and the desk, each named for its job, and no other pods",
          scraped == {"receipt-worker-receiver", "receipt-worker-desk"}, sorted(scraped))


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
    # One deployment at a time: a namespace variable, and every query of the fleet's series (and of KEDA's HPA)
    # selects it, so a second deployment in the same Prometheus is never summed into the first.
    check("the dashboard has a namespace variable (the deployment)", "namespace" in variable_names, sorted(variable_names))
    unscoped = [f"{p['title']}: {metric}" for p in panels for t in p["targets"]
                for metric, matched in promql_scan(substituted(t["expr"]))[1]
                if re.match(r"^(receipt_worker_|up$|kube_|namespace_)", metric) and "namespace" not in matched]
    check("every panel's query selects the deployment (namespace=~\"$namespace\")", not unscoped, unscoped)
    # What players feel and what the games earn, per game: the wait and the lag in seconds by app, revenue and
    # refunds by app and currency, the refund share, the build each replica runs.
    queries = [t["expr"] for p in panels for t in p["targets"]]
    wanted = {
        "the player's wait p50 and p99 by game": r"histogram_quantile\(0\.(5|99), sum by \(le, app\) \(rate\(receipt_worker_job_wait_seconds_bucket",
        "the lag in seconds by game": r"max by \(app\) \(receipt_worker_job_lag_seconds",
        "revenue by game and currency": r"sum by \(app, currency\) \(increase\(receipt_worker_revenue_milliunits_total",
        "refunds by game and currency": r"sum by \(app, currency\) \(increase\(receipt_worker_refunded_milliunits_total",
        "the refund share (the recording rule)": r"namespace_app_currency:receipt_worker:refund_share_6h",
        "the build each replica runs": r"by \([^)]*instance, version, revision\) \(receipt_worker_build_info",
    }
    for what, pattern in wanted.items():
        check(f"the dashboard shows {what}", any(re.search(pattern, q) for q in queries), pattern)
    # rate() and increase() apply to counters and histograms, never to a gauge.
    gauges = ("receipt_worker_partition_committed_offset", "receipt_worker_partition_lag", "receipt_worker_ready",
              "receipt_worker_jobs_in_flight", "receipt_worker_ledger_pool_connections", "receipt_worker_job_lag_seconds",
              "receipt_worker_notification_lag_seconds", "receipt_worker_retries_shared_games",
              "receipt_worker_build_info")
    misapplied = [t["expr"] for p in panels for t in p["targets"]
                  if re.search(r"(rate|increase)\(\s*(" + "|".join(gauges) + r")\b", t["expr"])]
    check("no panel applies rate() or increase() to a gauge", not misapplied, misapplied)
    misspelt = [f"{p['title']}: {found}" for p in panels for t in p["targets"] for found in bound_problems(t["expr"])]
    check('every panel\'s selector on a histogram bound matches both spellings (le="5" and le="5.0")', not misspelt,
          misspelt)


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
