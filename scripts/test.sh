#!/usr/bin/env bash
# The test command: installs what is missing, builds with warnings as errors, and runs every test against
# a real Kafka broker and a real PostgreSQL started for this run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
# The tests' temporary files (configuration files with their test secrets, ledgers, the workers' logs, the
# messages captured for the contract check) go in a directory of this run: removed when the run passes, kept
# for reading when it fails. The broker's and PostgreSQL's state stays where it was (SERVICES_TMPDIR), a short
# path: PostgreSQL's socket path must stay under 107 bytes.
export SERVICES_TMPDIR="${SERVICES_TMPDIR:-${TMPDIR:-/tmp}}"
tests_tmp="$(mktemp -d "${TMPDIR:-/tmp}/receipt-worker-tests.XXXXXX")"
export TMPDIR="$tests_tmp"
finish() {
    local status=$?
    set +e
    if [ "$status" -eq 0 ]; then rm -rf "$tests_tmp"; else echo "the tests' files are kept in $tests_tmp" >&2; fi
    exit "$status"
}
trap finish EXIT
swift format lint --strict --recursive Sources Tests Fuzz Benchmarks/Sources Benchmarks/Package.swift  # the house style (.swift-format): any finding fails
swift build --build-tests
# Fuzzing itself is `scripts/fuzz.sh` (exploration, minutes to hours); the inputs it found, the seeds and every
# crash kept are replayed here by FuzzReplayTests, in a second.
# The published contract (docs/): the AsyncAPI documents, the schemas and their examples; and every link of
# every document resolves inside the repository.
.deps/venv/bin/python Tests/contract/check_contract.py
.deps/venv/bin/python scripts/asyncapi-client.py --check
# The code generators an integrator reaches for (datamodel-code-generator, asyncapi-python's) on the schemas and
# both AsyncAPI documents: typed models that still load tomorrow's events (added fields and values).
.deps/venv/bin/python Tests/contract/check_generators.py
python3 Tests/docs/check_links.py
# The documents' JSON samples against their schemas, with every field the worker writes; the docs' index against
# docs/.
.deps/venv/bin/python Tests/docs/check_samples.py
python3 Tests/docs/check_index.py
# The rooms the compiler holds: which targets reach Kafka, the SQL ledger, the runtime and each C library.
python3 Tests/structure/check_package_graph.py
# Files past one screen (300 lines, three top-level types) are split or say why they read better whole.
python3 Tests/structure/check_file_sizes.py
# docs/metrics.md's table against the /metrics pages of `run` and `desk` (started without a broker, a few seconds):
# names, types, labels and every value of a fixed set, both ways.
python3 Tests/docs/check_metrics.py
# deploy/: every combination of the kustomization's components rendered and validated against Kubernetes' schemas
# and checkov's policies, the Secrets, the roles' configurations, the runbook's commands, the alert rules with
# promtool, the systemd unit (about a minute of CPU: alone, not beside the timed tests).
if .deps/venv/bin/python Tests/deploy/check_deploy.py --binary .build/debug/receipt-worker >"$TMPDIR/deploy-check.log"; then
    tail -n 1 "$TMPDIR/deploy-check.log"
else
    grep -v '^ok ' "$TMPDIR/deploy-check.log" >&2
    exit 1
fi
# At most 16 tests at once (scripts/lib/swift-suite.sh says why).
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-16}"
if [ "$#" -eq 0 ]; then
    # Every job, event and dead letter the end-to-end tests send or receive is captured and validated
    # against its schema after the run (Tests/TestSupport/ContractCapture.swift).
    capture="$(mktemp -d)"  # in the run's directory (TMPDIR)
    export RECEIPT_WORKER_CONTRACT_CAPTURE="$capture"
    # The whole Swift suite, in the order that keeps the timing assertions honest (the script says why).
    bash scripts/lib/swift-suite.sh
    .deps/venv/bin/python Tests/contract/check_contract.py --messages "$capture"
    # The reference grant service (examples/grant-service) on every result event the tests received.
    .deps/venv/bin/python examples/grant-service/test_grant_service.py "$capture"
    # The integration guide's producers and consumers (Python, Go) through a real worker, on a broker of their own.
    bash scripts/with-services.sh .deps/venv/bin/python examples/clients/test_clients.py
    # The support desk end to end: the console in a headless Chromium signing in at the test OpenID Connect
    # provider, the API's hostile callers, caps and approvals, the audit; SQLite, then PostgreSQL (about a minute;
    # it prints where the console's screenshot is).
    bash scripts/test-desk.sh
    # The release, dry: the archive, its SBOM and checksums, the binary run in a clean Debian 12 root with only the
    # runtime packages (--version, check-config); nothing edited, committed or tagged (docs/releasing.md).
    RELEASE_BUILD_CONFIGURATION=debug bash scripts/release.sh --dry-run
else
    bash scripts/with-services.sh swift test --skip-build "$@"
fi
