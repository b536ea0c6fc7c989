#!/usr/bin/env bash
# The ledger as it grows: the same end-to-end burst (broker -> receipt-worker -> App Store simulator at
# 100 ms -> ledger -> broker, all real processes, 1,000 jobs in flight) on each ledger when empty and when it
# holds 1 million and 10 million grants, with their results, notifications and states at the retention's steady
# state (written with set-based SQL: scripts/lib/prefill-postgres.sql, scripts/lib/prefill-sqlite.py), in one run.
# Job and order ids are random UUIDs and players one of a million, in the prefill and the bursts, as a game's
# backend sends them: an index on them is written at random places, its pages out of cache as the ledger grows.
# IDS=time-ordered makes job and order ids UUIDs of version 7 (RFC 9562, the time first), as the contract
# recommends: what a job writes under them goes to the indexes' newest pages.
# Per burst: jobs/s, the worker's CPU per job, PostgreSQL's CPU per job, WAL bytes per job (SQLite: the bytes the
# worker wrote), transaction ids per job, and the ledger's bytes per grant; CPU also in ECDSA P-256 verifications
# of this machine now. Then a projection to 100 million grants from a fit of each figure on log10(grants).
#   scripts/bench-growth.sh [JOBS] [SIZES]        (default 20000 jobs a burst; sizes "1000000 10000000")
# LEDGERS="postgresql" or "sqlite" for one ledger; BASELINE_BIN=PATH also bursts an empty ledger with that
# receipt-worker binary (another commit's), to compare two builds in one run. PGBOUNCER=transaction
# (or session) puts Debian's PgBouncer, with its defaults, between the workers and PostgreSQL (each database is
# migrated directly first, as the migration Job would); the prefill and the figures still go straight to it.
# To see where PostgreSQL's time goes: POSTGRES_OPTIONS="-c shared_buffers=1GB ..." starts it with those settings;
# LEDGER_DATABASE_OPTIONS="TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'" makes the ledgers' databases so;
# AFTER_PREFILL_SQL runs on the prefilled ledger (an index dropped, say); PG_PERF=PREFIX records a perf profile of
# PostgreSQL's processes during each burst (PREFIX-LABEL.data).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${1:-20000}"
sizes="${2:-1000000 10000000}"
case "${IDS:-random}" in
    random) ids_option=(--random-keys); time_ordered=false ;;
    time-ordered) ids_option=(--time-ordered-keys); time_ordered=true ;;
    *) echo "IDS=${IDS} is neither random nor time-ordered" >&2; exit 2 ;;
esac
# A baseline that cannot start (a library it was linked against gone with its worktree) would leave its burst
# waiting for answers for ever.
if [ -n "${BASELINE_BIN:-}" ] && ! "$BASELINE_BIN" --version >/dev/null; then
    echo "BASELINE_BIN=$BASELINE_BIN does not run (above: why)" >&2
    exit 2
fi
bash scripts/setup.sh
swift build -c release --product receipt-worker >/dev/null
swift build -c release --product appstore-sim >/dev/null
swift build -c release --package-path Benchmarks --product worker-bench >/dev/null
source scripts/lib/services.sh
source scripts/lib/ecdsa.sh
work="$(mktemp -d "${BENCH_DIR:-/tmp}/bench-growth.XXXXXX")"
worker_pid=""; sim_pid=""
cleanup() {
    [ -n "$worker_pid" ] && kill -9 "$worker_pid" 2>/dev/null || true
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
    [ -n "${BENCH_KEEP:-}" ] && cp "$SERVICES_DIR/postgres/server.log" "$BENCH_KEEP" 2>/dev/null
    services_stop
    rm -rf "$work"
}
trap cleanup EXIT
bench=Benchmarks/.build/release/worker-bench
worker=.build/release/receipt-worker
ecdsa_us="$(ecdsa_verify_us)"
hz="$(getconf CLK_TCK)"
echo "ECDSA P-256: one verification costs ${ecdsa_us} us on this machine now (openssl speed ecdsap256, one core)"

SERVICES_DIR=""; services_start_kafka 2>/dev/null
services_start_postgres 2>/dev/null
pg_base="${POSTGRES_URL%/*}"
worker_pg_base="$pg_base"
if [ -n "${PGBOUNCER:-}" ]; then
    services_start_pgbouncer "$PGBOUNCER" 2>/dev/null
    worker_pg_base="${PGBOUNCER_URL%/*}"
fi
if [ -n "${PG_LOG_SLOW_MS:-}" ]; then  # statements slower than this in PostgreSQL's log (kept: BENCH_KEEP=1)
    psql "$POSTGRES_URL" -qc "ALTER SYSTEM SET log_min_duration_statement = $PG_LOG_SLOW_MS" -c "SELECT pg_reload_conf()" >/dev/null
fi
services_start_simulator "$work"; sim_pid=$SIM_PID; sim=$SIM_URL
curl -sf -X PUT "$sim/admin/faults" -d '{"latency_ms": 100}' >/dev/null

ticks() {
    local total=0 pid
    for pid in "$@"; do total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0))); done
    echo "$total"
}
pg_ticks() { ticks $(pgrep -u postgres postgres | tr '\n' ' '); }
# Of those, the server's own processes (a checkpoint, autovacuum): work a burst may leave for the next one.
pg_background_ticks() {
    ticks $(pgrep -u postgres -f '^postgres: (checkpointer|background writer|walwriter|autovacuum)' | tr '\n' ' ')
}

# ledger_bytes KIND URL: every table and index of the ledger, and its grants.
ledger_bytes() {
    if [ "$1" = postgresql ]; then
        psql "$2" -qtAc "SELECT sum(pg_total_relation_size(c.oid)) || ' ' || (SELECT count(*) FROM receipt_worker.grants)
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'receipt_worker' AND c.relkind = 'r'"
    else
        local path="${2#sqlite:}"
        echo "$(( $(stat -c %s "$path") + $(stat -c %s "$path-wal" 2>/dev/null || echo 0) )) $(python3 -c \
            "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM grants').fetchone()[0])" "$path")"
    fi
}

# burst LABEL KIND LEDGER_URL BIN: one burst of $jobs jobs; prints the row, and its figures to $work/figures.
burst() {
    local label="$1" kind="$2" ledger="$3" bin="$4"
    local suffix; suffix="$(date +%s%N)"
    local worker_ledger="$ledger"
    if [ "$kind" = postgresql ] && [ -n "${PGBOUNCER:-}" ]; then
        worker_ledger="$worker_pg_base/${ledger##*/}"
        printf 'apple.bundle_id=com.example\nledger.url=%s\n' "$ledger" >"$work/migrate.properties"
        "$bin" ledger migrate --config "$work/migrate.properties" >/dev/null
    fi
    for topic in jobs results dlq; do
        .deps/tools/tansu topic create "$topic-$suffix" --partitions 4 --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null
    done
    cat >"$work/worker.properties" <<PROPS
apple.bundle_id=com.example
$(services_simulator_properties "$work")
ledger.url=$worker_ledger
topics.jobs=jobs-$suffix
topics.results=results-$suffix
topics.dlq=dlq-$suffix
worker.max_in_flight=1000
kafka.bootstrap.servers=$KAFKA_BOOTSTRAP
kafka.group.id=bench-$suffix
kafka.session.timeout.ms=6000
kafka.heartbeat.interval.ms=500
kafka.max.poll.interval.ms=10000
PROPS
    "$bench" prepare --bootstrap "$KAFKA_BOOTSTRAP" --sim "$sim" --topic "jobs-$suffix" --jobs "$jobs" \
        --prefix "g$suffix-" "${ids_option[@]}" >/dev/null
    local xid0=0 wal0=0 xid1=0 wal1=0
    if [ "$kind" = postgresql ]; then
        xid0="$(psql "$ledger" -qtAc 'SELECT txid_current()')"
        wal0="$(psql "$ledger" -qtAc "SELECT pg_current_wal_lsn() - '0/0'")"
    fi
    local pg0; pg0="$(pg_ticks)"
    local background0; background0="$(pg_background_ticks)"
    LOG_LEVEL=warning "$bin" run --config "$work/worker.properties" 2>"$work/worker.log" &
    worker_pid=$!
    local perf_pid=""
    if [ -n "${PG_PERF:-}" ]; then  # PG_PERF=PREFIX: a perf profile of PostgreSQL's processes during the burst
        perf record -F 999 -g -u postgres -o "$PG_PERF-${label//[^a-z0-9]/-}.data" >/dev/null 2>&1 &
        perf_pid=$!
    fi
    local rate; rate="$("$bench" drain --bootstrap "$KAFKA_BOOTSTRAP" --topic "results-$suffix" --jobs "$jobs")"
    [ -n "$perf_pid" ] && { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
    local worker_ticks; worker_ticks="$(ticks "$worker_pid")"
    local wchar; wchar="$(awk '/^wchar:/ {print $2}' "/proc/$worker_pid/io")"
    local pg1; pg1="$(pg_ticks)"
    local background1; background1="$(pg_background_ticks)"
    if [ "$kind" = postgresql ]; then
        xid1="$(psql "$ledger" -qtAc 'SELECT txid_current()')"
        wal1="$(psql "$ledger" -qtAc "SELECT pg_current_wal_lsn() - '0/0'")"
    fi
    kill -TERM "$worker_pid"; wait "$worker_pid" || true; worker_pid=""
    read -r bytes grants <<<"$(ledger_bytes "$kind" "$ledger")"
    python3 - "$label" "$kind" "$rate" "$worker_ticks" "$((pg1 - pg0))" "$((wal1 - wal0))" "$((xid1 - xid0 - 1))" \
        "$wchar" "$bytes" "$grants" "$jobs" "$hz" "$ecdsa_us" "$work/figures" "$((background1 - background0))" <<'PY'
import sys
label, kind, rate, worker, pg, wal, xids, wchar, size, grants, jobs, hz, ecdsa, out, background = sys.argv[1:]
jobs, hz, ecdsa = int(jobs), int(hz), float(ecdsa or 0)
per = lambda ticks: int(ticks) / hz / jobs * 1e6
rate_value = float(rate.split()[0])
worker_us, pg_us = per(worker), per(pg)
written = (int(wal) if kind == "postgresql" else int(wchar)) / jobs
xid_per_job = int(xids) / jobs if kind == "postgresql" else 0.0
per_grant = int(size) / max(int(grants), 1)
e = lambda us: f" ({us / ecdsa:.2f})" if ecdsa else ""
background_us = f"{per(background):.0f}" if kind == "postgresql" else "-"
print(f"{label:<34} {rate_value:>8.0f} {worker_us:>9.0f}{e(worker_us):<8} {pg_us:>9.0f}{e(pg_us):<8} "
      f"{background_us:>10} {written:>10.0f} {xid_per_job:>8.3f} {per_grant:>9.0f} {int(grants):>11}")
with open(out, "a") as f:
    f.write(f"{kind} {grants} {rate_value} {worker_us} {pg_us} {written} {xid_per_job} {per_grant}\n")
PY
}

# prefill KIND LEDGER_URL FROM TO
prefill() {
    local started; started="$(date +%s)"
    if [ "$1" = postgresql ]; then
        local from="$3"
        while [ "$from" -lt "$4" ]; do
            local to=$((from + 1000000)); [ "$to" -gt "$4" ] && to="$4"
            psql "$2" -q -v from="$from" -v to="$to" -v time_ordered="$time_ordered" \
                -f scripts/lib/prefill-postgres.sql >/dev/null
            from="$to"
        done
        psql "$2" -qc "VACUUM ANALYZE" >/dev/null
        if [ -n "${AFTER_PREFILL_SQL:-}" ]; then psql "$2" -qc "$AFTER_PREFILL_SQL" >/dev/null; fi
        # The prefill's aftermath is not the burst's cost: its dirty pages written now, not by a checkpoint during
        # the burst, and the autovacuums it set off ended first.
        psql "$2" -qc "CHECKPOINT" >/dev/null
        for _ in $(seq 600); do
            [ "$(psql "$2" -qtAc "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")" = 0 ] && break
            sleep 1
        done
    else
        python3 scripts/lib/prefill-sqlite.py "${2#sqlite:}" "$3" "$4" "${IDS:-random}"
    fi
    echo "  (prefilled grants $3 to $4 in $(( $(date +%s) - started )) s)"
}

printf '%-34s %8s %17s %17s %10s %10s %8s %9s %11s\n' burst "jobs/s" "worker us/job" "PostgreSQL us/job" \
    "of it bg" "WAL B/job" "xids/job" "B/grant" grants
echo "  (CPU per job in us, and in ECDSA verifications in brackets; \"of it bg\": PostgreSQL's checkpointer, writers"
echo "  and autovacuum; SQLite's WAL column: bytes the worker wrote)"
for kind in ${LEDGERS:-postgresql sqlite}; do
    if [ "$kind" = postgresql ]; then
        psql "$POSTGRES_URL" -qtAc "CREATE DATABASE growth ${LEDGER_DATABASE_OPTIONS:-}" >/dev/null
        ledger="$pg_base/growth"
    else
        ledger="sqlite:$work/growth.sqlite"
    fi
    if [ -n "${BASELINE_BIN:-}" ]; then
        if [ "$kind" = postgresql ]; then
            psql "$POSTGRES_URL" -qtAc "CREATE DATABASE baseline ${LEDGER_DATABASE_OPTIONS:-}" >/dev/null
            burst "$kind, empty, baseline build" "$kind" "$pg_base/baseline" "$BASELINE_BIN"
        else
            burst "$kind, empty, baseline build" "$kind" "sqlite:$work/baseline.sqlite" "$BASELINE_BIN"
        fi
    fi
    burst "$kind, empty" "$kind" "$ledger" "$worker"
    filled=0
    for size in $sizes; do
        prefill "$kind" "$ledger" "$filled" "$size"
        filled="$size"
        burst "$kind, $size grants" "$kind" "$ledger" "$worker"
    done
    [ "$kind" = postgresql ] && psql "$POSTGRES_URL" -qtAc "DROP DATABASE growth WITH (FORCE)" >/dev/null
    rm -f "$work/growth.sqlite"*
    # An empty ledger again, after the big one: the machine warmed up as for the last burst, so the two are compared
    # on equal terms (the first burst also pays for a cold start).
    if [ "$kind" = postgresql ]; then
        psql "$POSTGRES_URL" -qtAc "CREATE DATABASE again ${LEDGER_DATABASE_OPTIONS:-}" >/dev/null
        burst "$kind, empty again" "$kind" "$pg_base/again" "$worker"
        psql "$POSTGRES_URL" -qtAc "DROP DATABASE again WITH (FORCE)" >/dev/null
    else
        burst "$kind, empty again" "$kind" "sqlite:$work/again.sqlite" "$worker"
        rm -f "$work/again.sqlite"*
    fi
done
echo
echo "Projection to 100,000,000 grants: each figure fitted as a + b*log10(grants) on the prefilled bursts"
python3 - "$work/figures" <<'PY'
import math, sys
rows = [line.split() for line in open(sys.argv[1])]
names = ["jobs/s", "worker us/job", "PostgreSQL us/job", "WAL B/job", "xids/job", "B/grant"]
for kind in sorted({r[0] for r in rows}):
    points = [(int(r[1]), [float(v) for v in r[2:]]) for r in rows if r[0] == kind and int(r[1]) >= 100000]
    if len(points) < 2:
        continue
    xs = [math.log10(p[0]) for p in points]
    parts = []
    for column, name in enumerate(names):
        ys = [p[1][column] for p in points]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / max(sum((x - mx) ** 2 for x in xs), 1e-12)
        parts.append(f"{name} {my + b * (8 - mx):.3g}")
    print(f"  {kind}: " + ", ".join(parts))
PY
