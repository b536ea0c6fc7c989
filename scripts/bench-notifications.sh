#!/usr/bin/env bash
# The notification receiver's benchmark: a real broker, a real receipt-worker (SQLite ledger, or
# LEDGER=postgresql), and notification-bench posting signed App Store Server Notifications V2 over HTTP.
# Grants N purchases first (signed transactions, as jobs), then refunds each: the receiver's rate (verified,
# produced, acknowledged, answered 200), the processing rate to receipt.revoked events, and the receiver's
# p50/p99 answer time at half its rate.
#   scripts/bench-notifications.sh [N]      (default 10000)
# PERF=FILE records a perf profile of the worker while the receiver takes the burst; CONCURRENCY=C posts C at a time
# (default 64); WORKER_SETTINGS="key=value..." (newline-separated) adds to the worker's configuration.
# WORKER_BIN=PATH runs that receipt-worker binary (another commit's, to compare receivers with the same driver).
# Prints the worker's CPU per notification (received, then processed from the topic) in ECDSA verifications.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
count="${1:-10000}"
ledger_kind="${LEDGER:-sqlite}"
bash scripts/setup.sh
for product in receipt-worker appstore-sim; do swift build -c release --product "$product" >/dev/null; done
swift build -c release --package-path Benchmarks --product notification-bench >/dev/null
source scripts/lib/services.sh
work="$(mktemp -d)"
worker_pid=""
cleanup() {
    [ -n "$worker_pid" ] && kill -9 "$worker_pid" 2>/dev/null || true
    services_stop
    rm -rf "$work"
}
trap cleanup EXIT

services_start_kafka 2>/dev/null
suffix="$(date +%s%N)"
for topic in jobs:4 results:4 dlq:1 notifications:4 consumption:1; do
    .deps/tools/tansu topic create "${topic%%:*}-$suffix" --partitions "${topic##*:}" --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null
done
ledger="sqlite:$work/ledger.sqlite"
if [ "$ledger_kind" = postgresql ]; then
    services_start_postgres 2>/dev/null
    psql "$POSTGRES_URL" -qtAc "CREATE DATABASE bench_$suffix" >/dev/null
    ledger="${POSTGRES_URL%/*}/bench_$suffix"
fi
.build/release/appstore-sim --print-test-root >"$work/root.pem"
receiver_port="$(free_port)"
metrics_port="$(free_port)"
cat >"$work/worker.properties" <<PROPS
apple.bundle_id=com.example
apple.app_apple_id=1234567890
apple.root_certificates=$work/root.pem
ledger.url=$ledger
topics.jobs=jobs-$suffix
topics.results=results-$suffix
topics.dlq=dlq-$suffix
topics.notifications=notifications-$suffix
topics.consumption=consumption-$suffix
notifications.listen=127.0.0.1:$receiver_port
metrics.listen=127.0.0.1:$metrics_port
kafka.bootstrap.servers=$KAFKA_BOOTSTRAP
kafka.group.id=bench-$suffix
kafka.session.timeout.ms=6000
kafka.heartbeat.interval.ms=500
kafka.max.poll.interval.ms=10000
${WORKER_SETTINGS:-}
PROPS
LOG_LEVEL=warning "${WORKER_BIN:-.build/release/receipt-worker}" run --config "$work/worker.properties" 2>"$work/worker.log" &
worker_pid=$!
ready() { curl -sf "http://127.0.0.1:$metrics_port/readyz" >/dev/null; }
wait_for "the worker" 60 ready
source scripts/lib/ecdsa.sh
ecdsa_us="$(ecdsa_verify_us)"
echo "notification benchmark: $count notifications, $ledger_kind ledger, $(nproc) cores (broker, worker and driver share them)"
Benchmarks/.build/release/notification-bench --bootstrap "$KAFKA_BOOTSTRAP" --jobs "jobs-$suffix" --results "results-$suffix" \
    --receiver "http://127.0.0.1:$receiver_port/notifications/apple" --count "$count" \
    --concurrency "${CONCURRENCY:-64}" >"$work/driver.out" &
driver_pid=$!
# While the receiver takes the burst (from the first post to the last answer): each process's share of the
# machine's CPU, and with PERF the worker's profile (not the grants before it nor the processing after).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
idle_ticks() { awk '/^cpu / {print $5 + $6}' /proc/stat; }
broker_pid="$(cat "$SERVICES_DIR/tansu.pid")"
perf_pid="" burst_start=""
while kill -0 "$driver_pid" 2>/dev/null; do
    if [ -z "$burst_start" ] && grep -q '^posting' "$work/driver.out"; then
        burst_start="$EPOCHREALTIME $(ticks "$worker_pid") $(ticks "$broker_pid") $(ticks "$driver_pid") $(idle_ticks)"
        if [ -n "${PERF:-}" ]; then
            perf record -F 499 ${PERF_CALLGRAPH:+-g} -p "$worker_pid" -o "$PERF" >/dev/null 2>&1 &
            perf_pid=$!
        fi
    fi
    if [ -n "$burst_start" ] && grep -q '^receiver:' "$work/driver.out"; then
        burst_end="$EPOCHREALTIME $(ticks "$worker_pid") $(ticks "$broker_pid") $(ticks "$driver_pid") $(idle_ticks)"
        [ -n "$perf_pid" ] && { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
        break
    fi
    sleep 0.02
done
# When the driver has read the last receipt.revoked event: from the first post to then, the worker received and
# processed every notification (the grants before and the paced phase after are outside).
whole_end=""
while kill -0 "$driver_pid" 2>/dev/null; do
    if grep -q '^processing:' "$work/driver.out"; then whole_end="$(ticks "$worker_pid")"; break; fi
    sleep 0.02
done
wait "$driver_pid"
cat "$work/driver.out"
if [ -n "${burst_end:-}" ]; then
    python3 - "$burst_start" "$burst_end" "$(getconf CLK_TCK)" <<'PY'
import sys
start, end, hz = sys.argv[1].split(), sys.argv[2].split(), int(sys.argv[3])
seconds = float(end[0]) - float(start[0])
shares = [f"{name} {(int(b) - int(a)) / hz / seconds:.2f}" for name, a, b in zip(["worker", "broker", "driver", "idle"], start[1:], end[1:])]
print("CPU during the receiver's burst, in cores (of 2): " + ", ".join(shares) + " (idle: of the whole machine)")
PY
fi
if [ -n "${burst_start:-}" ] && [ -n "$whole_end" ] && [ -n "$ecdsa_us" ]; then
    python3 - "$(cut -d' ' -f2 <<<"$burst_start")" "$whole_end" "$count" "$(getconf CLK_TCK)" "$ecdsa_us" <<'PY'
import sys
start, end, count, hz, ecdsa = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
per = (end - start) / hz / count * 1e6
print(f"worker CPU per notification, received and processed: {per:.0f} us (= {per / ecdsa:.1f} ECDSA verifications"
      f" of {ecdsa} us)")
PY
fi
echo "worker peak memory: $(awk '/VmHWM/ {printf "%d MiB", $2 / 1024}' "/proc/$worker_pid/status")"
