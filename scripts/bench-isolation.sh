#!/usr/bin/env bash
# One game's latency while another game's Apple lane is paused, in one run: the worker serving two apps, the
# second with a backlog of BACKLOG transaction-id jobs queued ahead and Apple answering it 429 (an outage of
# its lane, `Retry-After` its end) for the whole measurement. The first app's jobs are then submitted at RATE
# a second for SECONDS, and their p50/p99 (submit -> result) printed for three cases:
#   alone                  no backlog, no outage (the baseline)
#   paused, parked         the backlog overflows the second app's waiting room onto topics.retries
#   paused, no park topic  topics.retries missing: the room fills and the jobs topic pauses for every app
#   scripts/bench-isolation.sh [BACKLOG] [RATE] [SECONDS]      (defaults 5000, 50, 20)
# worker.max_in_flight=100 (a waiting room of 1,000 per app); Apple answers the first app at once; SQLite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
backlog="${1:-5000}"
rate="${2:-50}"
seconds="${3:-20}"
bash scripts/setup.sh
swift build -c release --product receipt-worker >/dev/null
swift build -c release --product appstore-sim >/dev/null
swift build -c release --package-path Benchmarks --product worker-bench >/dev/null
source scripts/lib/services.sh
work="$(mktemp -d)"
worker_pid=""; sim_pid=""
cleanup() {
    [ -n "$worker_pid" ] && kill -9 "$worker_pid" 2>/dev/null || true
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
    services_stop
    rm -rf "$work"
}
trap cleanup EXIT
bench=Benchmarks/.build/release/worker-bench
second=com.example.second

# run NAME BACKLOG PARK(yes|no): prints the first app's latency line.
run() {
    local backlog_jobs="$2" park="$3"
    SERVICES_DIR=""; services_start_kafka 2>/dev/null
    services_start_simulator "$work"
    sim_pid=$SIM_PID sim=$SIM_URL
    curl -sf -X POST "$sim/admin/apps" -d "{\"bundle_id\": \"$second\", \"app_apple_id\": 2222222222}" >/dev/null
    local suffix; suffix="$(date +%s%N)"
    for topic in jobs results dlq; do
        .deps/tools/tansu topic create "$topic-$suffix" --partitions 4 --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null
    done
    if [ "$park" = yes ]; then
        .deps/tools/tansu topic create "retries-$suffix" --partitions 4 --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null
    fi
    local metrics_port; metrics_port="$(free_port)"
    cat >"$work/worker.properties" <<PROPS
apple.bundle_id=com.example
$(services_simulator_properties "$work")
apple.transaction_id_requires_account_token=false
apps.second.bundle_id=$second
ledger.url=sqlite:$work/ledger-$suffix.sqlite
topics.jobs=jobs-$suffix
topics.results=results-$suffix
topics.dlq=dlq-$suffix
topics.retries=retries-$suffix
worker.max_in_flight=100
retry.max_attempts=100
kafka.bootstrap.servers=$KAFKA_BOOTSTRAP
kafka.group.id=bench-$suffix
metrics.listen=127.0.0.1:$metrics_port
PROPS
    if [ "$backlog_jobs" -gt 0 ]; then
        # The second app's lane: 429 until the measurement is long over, Retry-After saying when.
        curl -sf -X PUT "$sim/admin/faults" -d "{\"bundle_id\": \"$second\", \"outage_start_in_ms\": 0, \"outage_seconds\": 3600, \"outage_mode\": \"rate_limited\"}" >/dev/null
        "$bench" prepare --bootstrap "$KAFKA_BOOTSTRAP" --sim "$sim" --topic "jobs-$suffix" --jobs "$backlog_jobs" \
            --proof transaction_id --bundle-id "$second" --prefix s >/dev/null
    fi
    LOG_LEVEL=warning .build/release/receipt-worker run --config "$work/worker.properties" 2>"$work/worker.log" &
    worker_pid=$!
    # Ready, and the backlog read as far as it will be (its room full; parked or paused).
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$metrics_port/readyz" >/dev/null 2>&1 && break
        sleep 0.2
    done
    sleep 5
    local line
    line="$("$bench" paced --bootstrap "$KAFKA_BOOTSTRAP" --sim "$sim" --topic "jobs-$suffix" --proof receipt \
        --results "results-$suffix" --rate "$rate" --seconds "$seconds" 2>/dev/null)" ||
        line="no result at all (the bench waits 60 s for the first)"
    curl -s "http://127.0.0.1:$metrics_port/metrics" >"$work/metrics"
    local parked waiting paused
    parked="$(awk '/^receipt_worker_messages_parked_total\{group="second"\}/ {print $2}' "$work/metrics")"
    waiting="$(awk '/^receipt_worker_jobs_waiting\{group="second"\}/ {print $2}' "$work/metrics")"
    paused="$(awk -v t="jobs-$suffix" '$0 ~ "^receipt_worker_topic_paused\\{topic=\"" t "\"\\}" {print $2}' "$work/metrics")"
    kill -TERM "$worker_pid"; wait "$worker_pid" || true; worker_pid=""
    kill "$sim_pid" 2>/dev/null; wait "$sim_pid" 2>/dev/null || true; sim_pid=""
    services_stop
    printf '%-24s %s (second app: %s waiting, %s parked; jobs topic paused: %s)\n' "$1" "$line" \
        "${waiting:-0}" "${parked:-0}" "${paused:-0}"
}

echo "The first app's jobs at $rate/s for $seconds s while the second app's lane answers 429, $backlog of its jobs queued"
echo "ahead; worker.max_in_flight=100 (a waiting room of 1,000 per app), one replica, 2 cores shared with everything:"
run "alone" 0 yes
run "paused, parked" "$backlog" yes
run "paused, no park topic" "$backlog" no
