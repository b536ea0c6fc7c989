#!/usr/bin/env bash
# What tracing costs: the worker's CPU per job with traces off, then on (otel.endpoint, every trace sampled,
# exported over OTLP/HTTP to a receiver that decodes each request, Tests/tracing/otlp_receiver.py), in one run on
# this machine, with the same broker, simulator and SQLite ledger settings (scripts/bench-worker.sh, one ledger, no
# Apple latency: the worker's own CPU is what shows).
#   scripts/bench-tracing.sh [JOBS]     (default 20000)
# LEDGERS=postgresql measures on PostgreSQL instead; ROUNDS=2 repeats the pair (the machine's speed drifts). Last,
# one job's trace as the receiver decoded it (Tests/tracing/tree.py).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${1:-20000}"
bash scripts/setup.sh
work="$(mktemp -d)"
receiver_pid=""
cleanup() {
    [ -n "$receiver_pid" ] && kill "$receiver_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
.deps/venv/bin/python Tests/tracing/otlp_receiver.py "$work/port" "$work/spans.jsonl" &
receiver_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
endpoint="http://127.0.0.1:$(cat "$work/port")/v1/traces"
bench() {  # bench LABEL [OTEL_ENDPOINT]
    local output  # the whole output first: a reader that stops early would cut the benchmark short
    output="$(OTEL_ENDPOINT="${2:-}" LEDGERS="${LEDGERS:-sqlite}" LATENCIES=0 NAIVE=no TWO_APPS=no \
        bash scripts/bench-worker.sh "$jobs" 2>&1)"
    echo "$1: $(grep 'CPU per job' <<<"$output" | head -1 | sed -E 's/.*CPU per job \(us\): //')"
}
for _ in $(seq "${ROUNDS:-1}"); do
    bench "tracing off"
    bench "tracing on " "$endpoint"
done
spans="$(wc -l <"$work/spans.jsonl" 2>/dev/null || echo 0)"
echo "the receiver decoded $spans spans (the traced runs' queued and paced jobs)"
# One job's tree, as the receiver decoded it.
.deps/venv/bin/python Tests/tracing/tree.py "$work/spans.jsonl"
