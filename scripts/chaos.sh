#!/usr/bin/env bash
# The chaos run: three receipt-worker replicas on one PostgreSQL ledger, jobs of every proof type with
# replays, restores, redeliveries, sandbox receipts and product swaps mixed in, while the replicas are
# killed with SIGKILL and restarted, "Apple" (the simulator) has outages and 429 bursts, and PostgreSQL
# drops every connection. Then it checks every answer against the contract and prints:
#   jobs without an answer, purchases granted to two orders, genuine purchases denied, wrong deny reasons,
#   redeliveries with a new event_id (each must be 0; the run exits 1 otherwise).
#
#   scripts/chaos.sh [JOBS]               one full run (default 20000 jobs): 20 kill -9s, 3 outages,
#                                         3 bursts of 429s, PostgreSQL's connections terminated twice
#   scripts/chaos.sh --dense [ROUNDS]     short dense rounds (default 20): 3000 jobs each, kills and
#                                         rebalances within 30 s, intake paused by a small budget
#                                         (worker.max_in_flight=32) and a slow Apple (150 ms)
# Not part of the test command: a full run takes several minutes. Only loopback addresses are used.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=full; jobs=20000; rounds=1
if [ "${1:-}" = --dense ]; then mode=dense; rounds="${2:-20}"; jobs=3000; elif [ -n "${1:-}" ]; then jobs="$1"; fi

bash scripts/setup.sh >/dev/null
for product in receipt-worker appstore-sim; do swift build -c release --product "$product" >/dev/null; done
swift build -c release --package-path Benchmarks --product chaos-driver >/dev/null
source scripts/lib/services.sh
bin=.build/release
# Logs, the plan and the configuration stay in .chaos/ (ignored by git) until the next run.
work="$PWD/.chaos"
rm -rf "$work" && mkdir -p "$work"
sim_pid=""
declare -a replica_pids=("" "" "")
cleanup() {
    for pid in "${replica_pids[@]}"; do [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true; done
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
    services_stop
}
trap cleanup EXIT
log() { printf '[chaos] %s\n' "$*" >&2; }

services_start_kafka 2>/dev/null
services_start_postgres 2>/dev/null
services_start_simulator "$work"
sim_pid=$SIM_PID sim=$SIM_URL
faults() { curl -sf -X PUT "$sim/admin/faults" -d "$1" >/dev/null; }

# start_replica N: (re)starts replica N on the round's configuration.
start_replica() {
    "$bin/receipt-worker" run --config "$work/worker.properties" >>"$work/replica-$1.log" 2>&1 &
    replica_pids[$1]=$!
}
kill_replica() { kill -9 "${replica_pids[$1]}" 2>/dev/null || true; wait "${replica_pids[$1]}" 2>/dev/null || true; }
terminate_connections() {
    psql "$POSTGRES_URL" -qtAc "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
        WHERE datname = 'chaos_$1' AND pid <> pg_backend_pid()"
}

# round NAME: one run of the scenario; prints the checker's figures; returns its status.
round() {
    local name="$1" suffix; suffix="$(date +%s%N)"
    for topic in jobs results dlq; do
        .deps/tools/tansu topic create "$topic-$suffix" --partitions 6 --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null
    done
    psql "$POSTGRES_URL" -qtAc "CREATE DATABASE chaos_$suffix" >/dev/null
    local in_flight=1000 latency=20
    [ "$mode" = dense ] && { in_flight=32; latency=150; }
    cat >"$work/worker.properties" <<PROPS
apple.bundle_id=com.example
$(services_simulator_properties "$work")
ledger.url=${POSTGRES_URL%/*}/chaos_$suffix
ledger.pool_size=4
topics.jobs=jobs-$suffix
topics.results=results-$suffix
topics.dlq=dlq-$suffix
worker.max_in_flight=$in_flight
worker.drain_timeout_ms=2000
retry.max_attempts=100
retry.initial_backoff_ms=50
retry.max_backoff_ms=2000
kafka.bootstrap.servers=$KAFKA_BOOTSTRAP
kafka.group.id=chaos-$suffix
kafka.session.timeout.ms=6000
kafka.heartbeat.interval.ms=500
kafka.max.poll.interval.ms=10000
PROPS
    faults "{\"latency_ms\": $latency}"
    "Benchmarks/$bin/chaos-driver" prepare --sim "$sim" --jobs "$jobs" --plan "$work/plan.json" --run "$name" >&2
    for n in 0 1 2; do start_replica "$n"; done

    local submit_rate=400 kills=20 duration=60 killed=0 outages=0 bursts=0 terminations=0
    [ "$mode" = dense ] && { submit_rate=300; kills=6; duration=25; }
    "Benchmarks/$bin/chaos-driver" submit --bootstrap "$KAFKA_BOOTSTRAP" --topic "jobs-$suffix" --plan "$work/plan.json" \
        --rate "$submit_rate" >&2 &
    local submitter=$!

    # The bad day, spread over the submission: kill -9s (each replica restarted a moment later), Apple
    # outages, 429 bursts, PostgreSQL dropping every connection.
    local step; step=$(python3 -c "print($duration / ($kills + 1))")
    for kill in $(seq "$kills"); do
        sleep "$step"
        local victim=$((RANDOM % 3))
        kill_replica "$victim"
        killed=$((killed + 1))
        case "$kill" in
            3 | 10 | 16)
                faults "{\"latency_ms\": $latency, \"outage_start_in_ms\": 0, \"outage_seconds\": 3}"
                outages=$((outages + 1)) ;;
            6 | 13 | 19)
                faults "{\"latency_ms\": $latency, \"rate_limit_rate\": 0.5, \"retry_after_seconds\": 1}"
                bursts=$((bursts + 1)) ;;
            8 | 15)
                if [ "$mode" = full ]; then
                    log "PostgreSQL dropped $(terminate_connections "$suffix") connections"
                    terminations=$((terminations + 1))
                fi ;;
            *) faults "{\"latency_ms\": $latency}" ;;
        esac
        sleep 0.5
        start_replica "$victim"
    done
    if [ "$mode" = dense ]; then
        log "PostgreSQL dropped $(terminate_connections "$suffix") connections"
        terminations=$((terminations + 1))
    fi
    wait "$submitter"
    log "kill -9: $killed, Apple outages: $outages, 429 bursts: $bursts, PostgreSQL connections terminated: $terminations times"
    faults "{\"latency_ms\": 0}"
    local status=0
    "Benchmarks/$bin/chaos-driver" check --bootstrap "$KAFKA_BOOTSTRAP" --results "results-$suffix" --dlq "dlq-$suffix" \
        --plan "$work/plan.json" --timeout 240 || status=$?
    for n in 0 1 2; do kill -TERM "${replica_pids[$n]}" 2>/dev/null || true; done
    for n in 0 1 2; do wait "${replica_pids[$n]}" 2>/dev/null || true; replica_pids[$n]=""; done
    return "$status"
}

failed=0
started=$SECONDS
for r in $(seq "$rounds"); do
    log "round $r of $rounds ($mode, $jobs jobs)"
    if round "r$r"; then log "round $r: every figure as required"; else failed=$((failed + 1)); log "round $r FAILED"; fi
done
echo "rounds: $rounds, failed: $failed, time: $((SECONDS - started)) s"
[ "$failed" -eq 0 ]
