#!/usr/bin/env bash
# The worker's peak memory at the shipped defaults (worker.max_in_flight=1000,
# worker.max_in_flight_bytes=32 MiB) when every job carries a 250 KB receipt and Apple is slow (300 ms), so
# jobs pile up: the figure to hold against the Kubernetes limit (deploy/kubernetes/deployment.yaml, 512 Mi).
#   scripts/bench-memory.sh [JOBS]     (default 2000)
# WORKER_BIN=PATH runs that receipt-worker binary instead (another build's, to compare).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${1:-2000}"
bash scripts/setup.sh >/dev/null
for product in receipt-worker appstore-sim; do swift build -c release --product "$product" >/dev/null; done
swift build -c release --package-path Benchmarks --product worker-bench >/dev/null
source scripts/lib/services.sh
work="$(mktemp -d)"; sim_pid=""; worker_pid=""
cleanup() {
    [ -n "$worker_pid" ] && kill -9 "$worker_pid" 2>/dev/null || true
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
    services_stop; rm -rf "$work"
}
trap cleanup EXIT
services_start_kafka 2>/dev/null
bin=.build/release
services_start_simulator "$work"
sim_pid=$SIM_PID sim=$SIM_URL
curl -sf -X PUT "$sim/admin/faults" -d '{"latency_ms": 300}' >/dev/null
for topic in jobs results dlq; do
    .deps/tools/tansu topic create "$topic" --partitions 4 --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null
done
"Benchmarks/$bin/worker-bench" prepare --bootstrap "$KAFKA_BOOTSTRAP" --sim "$sim" --topic jobs --jobs "$jobs" --padding 250000
cat >"$work/worker.properties" <<PROPS
apple.bundle_id=com.example
apple.verify_receipt.production_url=$sim/production/verifyReceipt
apple.verify_receipt.sandbox_url=$sim/sandbox/verifyReceipt
apple.allow_insecure_urls=true
apple.root_certificates=$work/root.pem
ledger.url=sqlite:$work/ledger.sqlite
topics.jobs=jobs
topics.results=results
topics.dlq=dlq
kafka.bootstrap.servers=$KAFKA_BOOTSTRAP
kafka.group.id=memory
kafka.session.timeout.ms=6000
kafka.heartbeat.interval.ms=500
kafka.max.poll.interval.ms=10000
PROPS
"${WORKER_BIN:-$bin/receipt-worker}" run --config "$work/worker.properties" 2>"$work/worker.log" &
worker_pid=$!
"Benchmarks/$bin/worker-bench" drain --bootstrap "$KAFKA_BOOTSTRAP" --topic results --jobs "$jobs"
peak=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$worker_pid/status")
limit=$(sed -n "s/.*limits: {memory: \([0-9]*\)Mi}.*/\1/p" deploy/kubernetes/deployment.yaml)
echo "peak RSS ${peak} MiB with ${jobs} jobs of 250 KB at the shipped defaults; Kubernetes memory limit ${limit:-?} Mi"
