#!/usr/bin/env python3
"""The rooms the compiler holds: reads the package graph (`swift package describe --type json`) and every source
file's imports, and fails when a target reaches what its layer must not.

- Each C library is imported by the one target that wraps it: OpenSSL by Crypto, librdkafka by Kafka, SQLite and
  libpq by Ledger, libcurl by HTTPClient, libmicrohttpd by HTTPServerKit, the build's revision by ReceiptWorker.
  Test code may reach past a layer (a mock cluster, a ledger file corrupted on purpose), except into OpenSSL.
- The flows, the events, support and the desk (Flows, Events, Support, DeskService) never reach Kafka, the SQL
  ledger (Ledger), the runtime (Runtime), the configuration or the worker's composition (ReceiptWorker), however
  indirectly: they are tested with in-memory stores, and run wherever they are composed.
- A file imports only modules its target declares (directly or through its dependencies).

Run from the repository root: python3 Tests/structure/check_package_graph.py
"""
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Each C module, and the product targets allowed to depend on it.
C_LAYERS = {
    "COpenSSL": {"Crypto"},
    "CRdKafka": {"Kafka"},
    "CSQLite": {"Ledger"},
    "CPostgres": {"Ledger"},
    "CCurl": {"HTTPClient"},
    "CZlib": {"HTTPClient"},
    "CMicroHTTPD": {"HTTPServerKit"},
    # Observability: a thread's name; Runtime: a message's task reserves its frames' slab
    "CLinux": {"HTTPClient", "HTTPServerKit", "AppStoreSimulator", "Observability", "Runtime"},
    "CBuildInfo": {"ReceiptWorker"},
}
# Modules whose C headers a target may import: the same targets (only the wrapper itself writes `import C…`).
C_IMPORTERS = C_LAYERS
CONFINED = ["Flows", "Events", "Support", "DeskService"]
FORBIDDEN_FOR_CONFINED = {"Kafka", "Ledger", "Runtime", "Configuration", "ReceiptWorker", "CRdKafka", "CSQLite",
                          "CPostgres"}


def describe():
    out = subprocess.run(["swift", "package", "describe", "--type", "json"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])


def main():
    package = describe()
    targets = {t["name"]: t for t in package["targets"]}
    deps = {name: set(t.get("target_dependencies", [])) for name, t in targets.items()}
    problems = []

    def closure(name):
        seen, todo = set(), list(deps.get(name, ()))
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo += deps.get(d, ())
        return seen

    for name, target in targets.items():
        is_test = target["type"] == "test" or target["path"].startswith(("Tests/", "Fuzz/"))
        for c_module, allowed in C_LAYERS.items():
            if c_module in deps[name] and name not in allowed and (not is_test or c_module == "COpenSSL"):
                problems.append(f"{name} depends on {c_module}: only {', '.join(sorted(allowed))} may")
        # What its files import.
        for path in sorted((ROOT / target["path"]).rglob("*.swift")):
            for match in re.finditer(r"^(?:@testable |@_exported |public |package |internal )*import (\w+)",
                                     path.read_text(), re.M):
                module = match.group(1)
                rel = path.relative_to(ROOT)
                if module in C_IMPORTERS and name not in C_IMPORTERS[module] and (not is_test or module == "COpenSSL"):
                    problems.append(f"{rel} imports {module}: only {', '.join(sorted(C_IMPORTERS[module]))} may")
                if module in targets and module != name and module not in closure(name):
                    problems.append(f"{rel} imports {module}, which {name} does not depend on")

    for name in CONFINED:
        if name not in targets:
            problems.append(f"no target {name}")
            continue
        reached = closure(name) & FORBIDDEN_FOR_CONFINED
        for module in sorted(reached):
            problems.append(f"{name} reaches {module}")
        for module in sorted(deps[name] & set(C_LAYERS)):
            problems.append(f"{name} depends on the C module {module} directly")

    importers = {n for n, d in deps.items() if "COpenSSL" in d}
    if importers != {"Crypto"}:
        problems.append(f"COpenSSL is depended on by {', '.join(sorted(importers))}: only Crypto may")

    for problem in problems:
        print(f"package graph: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"package graph: {len(targets)} targets; C libraries behind their layers; "
          f"{', '.join(CONFINED)} reach no Kafka, SQL ledger, runtime or composition")
    return 0


if __name__ == "__main__":
    sys.exit(main())
