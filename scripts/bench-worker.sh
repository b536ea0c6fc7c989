#!/usr/bin/env bash
# End-to-end worker benchmark: broker -> receipt-worker -> App Store simulator -> ledger -> broker, all
# real processes on this machine. For each ledger (SQLite, PostgreSQL) and simulated Apple latency (0 and
# 100 ms): throughput over N queued jobs, p50/p99 job latency while submitting at half that throughput, and
# the worker's peak memory. Then the naive design (one job at a time, worker.max_in_flight=1) for the ratio.
#   scripts/bench-worker.sh [JOBS]      (default 50000)
# For quicker runs while profiling: LEDGERS="postgresql" (one ledger), LATENCIES="100", NAIVE=no;
# PERF=/tmp/worker records a perf profile of the worker during each burst (/tmp/worker-LEDGER-LATENCY.data;
# PERF_CALL_GRAPH="--call-graph dwarf,16384" for call graphs through libc and SQLite, which have no frame pointers;
# PERF_FREQUENCY=2000 samples more often than the default 499 a second);
# MALLOCS=yes counts the worker's calls of malloc during each burst (perf probes on jemalloc's, which it links, and
# glibc's; for a build on glibc's, also those for more than 1032 bytes, which its per-thread cache never serves): exact
# where CPU figures move by ±10 us between runs, but they slow every call, so that run's CPU figures are not comparable;
# WAL_PAGES=yes prints, for SQLite, the decisions a group commit holds and the pages a decision writes to each table
# and index (copies of the write-ahead log taken during the burst, read by scripts/lib/wal-pages.py; not with
# BASELINE_BIN); PACED=no skips the latency measured at half the throughput; PACED_DIVISOR=10 measures it at a
# tenth instead; PROOF=signed_transaction makes every job carry a signed transaction instead of a
# receipt (PROOFS="receipt signed_transaction": one configuration of each, each kind's CPU per job in the same
# run); TWO_APPS=no skips the two-app, rate-limited run (TWO_APP_JOBS per app, default 1500); WORKER_BIN=PATH
# runs that receipt-worker binary (another commit's, to compare workers with the same simulator and driver);
# OTEL_ENDPOINT=URL has the worker export its traces there (scripts/bench-tracing.sh compares CPU per job with and
# without); TLS=yes has the worker call Apple as deployed, over TLS (HTTP/2 offered by ALPN, as Apple's endpoints
# do), through nghttpx in front of the simulator (scripts/lib/services.sh; not the two-app run, which measures
# Apple's rate limit). BASELINE_BIN=PATH [ROUNDS=2] compares this build with another in one run (below), the way to
# compare two builds' CPU per job.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${1:-50000}"
bash scripts/setup.sh
swift build -c release --product receipt-worker >/dev/null
swift build -c release --product appstore-sim >/dev/null
swift build -c release --package-path Benchmarks --product worker-bench >/dev/null
source scripts/lib/services.sh
work="$(mktemp -d)"
worker_pid=""; sim_pid=""; tls_pid=""
cleanup() {
    [ -n "$worker_pid" ] && kill -9 "$worker_pid" 2>/dev/null || true
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
    # Started inside a burst's $(...), whose variables never reach here: its pid is in a file.
    [ -f "$work/tls.pid" ] && kill "$(cat "$work/tls.pid")" 2>/dev/null || true
    services_stop
    rm -rf "$work"
}
trap cleanup EXIT
bench=Benchmarks/.build/release/worker-bench

# WAL_PAGES=yes: copies of the SQLite ledger's write-ahead log, taken every 0.2 s from when it appears (at most
# 30: the first 6 s of the burst), for scripts/lib/wal-pages.py to tell which tables and indexes a commit writes.
copy_wal() {
    local log="$1-wal" into="$2" taken=0
    mkdir -p "$into"
    while [ "$taken" -lt 30 ]; do
        if [ -s "$log" ]; then
            taken=$((taken + 1))
            cp "$log" "$into/$taken.wal"
        fi
        sleep 0.2
    done
}

# Sets sim (the simulator, for its admin calls) and apple (where the worker calls Apple: the simulator, or with
# TLS=yes the TLS front before it, HTTP/2 and HTTP/1.1 offered as Apple's endpoints do) and apple_properties (what
# the worker needs besides the URLs).
start_sim() {
    services_start_simulator "$work"
    sim_pid=$SIM_PID sim=$SIM_URL apple=$SIM_URL apple_properties=""
    if [ "${TLS:-no}" = yes ]; then
        services_start_tls_front "$sim" "$work" || exit 1
        tls_pid=$TLS_PID apple=$TLS_URL apple_properties="http.ca_file=$TLS_CA_FILE"
        echo "$tls_pid" >"$work/tls.pid"
    fi
    curl -sf -X PUT "$sim/admin/faults" -d "{\"latency_ms\": $1}" >/dev/null
}

stop_sim() {
    kill "$sim_pid" 2>/dev/null; wait "$sim_pid" 2>/dev/null || true; sim_pid=""
    if [ -n "$tls_pid" ]; then
        kill "$tls_pid" 2>/dev/null; wait "$tls_pid" 2>/dev/null || true; tls_pid=""; rm -f "$work/tls.pid"
    fi
}

# CPU ticks (user+system) in a stat file of /proc: its fields after the name's closing parenthesis (a name may hold
# spaces), where utime and stime are 12 and 13; 0 once the process or thread is gone.
stat_ticks() { sed 's/.*) //' "$1" 2>/dev/null | awk '{print $12 + $13} END {if (NR == 0) print 0}'; }
# CPU ticks (user+system) used so far by the given processes.
cpu_ticks() {
    local total=0 pid
    for pid in "$@"; do total=$((total + $(stat_ticks "/proc/$pid/stat"))); done
    echo "$total"
}
# The worker's CPU ticks by its threads' names (NamedThread), as "http:ledger:kafka:named": libcurl's event loop
# (http-client), the ledger's threads (ledger-*), librdkafka's and the poll loops (rdk:*, kafka-*), then 1 when a
# thread has one of the names a build with NamedThread gives, else 0 (an older build's split is not told). The
# handlers' tasks are the rest of the worker's ticks: a thread that ended between two snapshots counts there.
thread_ticks() {
    local dir
    for dir in /proc/"$1"/task/*; do
        # A thread may end between the listing and the read: the redirection's own error silenced too.
        echo "$({ tr ' ' '_' <"$dir/comm"; } 2>/dev/null) $(stat_ticks "$dir/stat")"
    done | awk '{ if ($1 == "http-client") h += $NF; else if ($1 ~ /^ledger-/) l += $NF;
                  else if ($1 ~ /^(rdk:|kafka-)/) k += $NF;
                  if ($1 == "http-client" || $1 ~ /^(ledger-|kafka-)/) named = 1 }
                END { printf "%d:%d:%d:%d\n", h, l, k, named }'
}
# "worker simulator broker postgresql" CPU ticks now, then the bytes the worker has written with write(2)
# and its kin (wchar): with SQLite, mostly the ledger's WAL and checkpoints, beside the log file and the
# eventfds; not the sockets, which librdkafka, libcurl and libpq write with send and sendmsg. Then the
# times the worker's threads have been switched out (voluntary and not): each is a hop between threads
# or a wait, a few microseconds of the kernel's; the threads' ticks; last, the worker's minor page faults
# (memory touched for the first time, or again after the allocator gave it back): a count, steady where
# CPU figures move.
cpu_snapshot() {
    echo "$(cpu_ticks "$worker_pid") $(cpu_ticks "$sim_pid") $(cpu_ticks "$(cat "$SERVICES_DIR/tansu.pid")")" \
        "$(cpu_ticks $(pgrep -u postgres postgres | tr '\n' ' '))" \
        "$(awk '/^wchar:/ {print $2}' "/proc/$worker_pid/io" 2>/dev/null || echo 0)" \
        "$(cat /proc/"$worker_pid"/task/*/status 2>/dev/null | awk '/ctxt_switches:/ {s += $2} END {print s + 0}')" \
        "$(thread_ticks "$worker_pid")" \
        "$(sed 's/.*) //' "/proc/$worker_pid/stat" 2>/dev/null | awk '{print $8} END {if (NR == 0) print 0}')"
}
if [ "${MALLOCS:-no}" = yes ]; then  # probes on malloc (glibc's kept, jemalloc's made anew): counting slows every call
    libc="$(ldd .build/release/receipt-worker | awk '/libc.so.6/ {print $3}')"
    perf probe -l 2>/dev/null | grep -q 'probe_libc:malloc ' || perf probe -q -x "$libc" malloc
    # and one that reads the size: a call for more than 1032 bytes passes glibc's per-thread cache by
    perf probe -l 2>/dev/null | grep -q 'probe_libc:mallocsz ' || perf probe -q -x "$libc" --add 'mallocsz=malloc bytes=%di:u64'
    # jemalloc's, which the worker links (a build before it, or a BASELINE_BIN, may run on glibc's): its exported
    # malloc by address (by name perf would also probe the library's own calls through its PLT), made anew each run
    # so that an upgraded library is never probed at its predecessor's address.
    jemalloc="$(ldd .build/release/receipt-worker | awk '/libjemalloc/ {print $3}')"
    perf probe -q -d 'probe_jemalloc:*' 2>/dev/null || true
    if [ -n "$jemalloc" ]; then
        perf probe -q -x "$jemalloc" --add "probe_jemalloc:jemalloc=0x$(nm -D --defined-only "$jemalloc" | awk '$3 == "malloc" {print $1}')"
    fi
fi
source scripts/lib/ecdsa.sh
ecdsa_us="$(ecdsa_verify_us)"
echo "ECDSA P-256: one verification costs ${ecdsa_us} us on this machine now (openssl speed ecdsap256, one core)"

# CPU microseconds per job of each process between two snapshots, and the worker's in ECDSA verifications.
cpu_per_job() {
    python3 - "$1" "$2" "$3" "$(getconf CLK_TCK)" "$ecdsa_us" <<'PY'
import sys
before, after, jobs, hz = sys.argv[1].split(), sys.argv[2].split(), int(sys.argv[3]), int(sys.argv[4])
ecdsa = float(sys.argv[5] or 0)
names = ["worker", "simulator", "broker", "PostgreSQL"]
per_job = [(int(a) - int(b)) / hz / jobs * 1e6 for b, a in zip(before[:4], after[:4])]
parts = [f"{name} {value:.0f}" for name, value in zip(names, per_job)]
ratio = f" (worker = {per_job[0] / ecdsa:.1f} ECDSA verifications of {ecdsa:.1f} us)" if ecdsa else ""
written = (int(after[4]) - int(before[4])) / jobs / 1024
switches = (int(after[5]) - int(before[5])) / jobs
named = [(int(a) - int(b)) / hz / jobs * 1e6 for b, a in zip(before[6].split(":")[:3], after[6].split(":")[:3])]
threads = [per_job[0] - sum(named)] + named  # the tasks: the rest of the worker's CPU
split = ", ".join(f"{name} {value:.0f}" for name, value in zip(["tasks", "HTTP loop", "ledger", "Kafka"], threads))
if after[6].split(":")[3] != "1":  # a build before NamedThread: every thread has the dispatch thread's name
    split = "not told apart (this build does not name its threads)"
faults = (int(after[7]) - int(before[7])) / jobs
print("CPU per job (us): " + ", ".join(parts) + ratio + f"; worker wrote {written:.1f} KiB per job"
      + f", {switches:.1f} context switches and {faults:.1f} page faults per job; the worker's by thread (us): {split}")
PY
}

# The worker's own p50/p99 (job taken -> result acknowledged) during the paced phase, from the difference
# of two scrapes of receipt_worker_job_duration_seconds, interpolated within buckets.
worker_quantiles() {
    python3 - "$@" <<'PY'
import re, sys
def buckets(path, series):
    found = {}
    for line in open(path):
        m = re.match(series + r'_bucket\{(.*?)le="([^"]+)"\} (\d+)', line)
        if m: found.setdefault(m.group(1), {})[float("inf") if m.group(2) == "+Inf" else float(m.group(2))] = int(m.group(3))
    return found
def quantile(before, after, q):
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0) for b in bounds]
    rank, lower, below = q * counts[-1], 0.0, 0
    for bound, cumulative in zip(bounds, counts):
        if cumulative >= rank:
            return lower if bound == float("inf") else lower + (bound - lower) * (rank - below) / max(cumulative - below, 1)
        lower, below = bound, cumulative
    return lower
before_path, after_path, series = sys.argv[1], sys.argv[2], sys.argv[3]
before, after = buckets(before_path, series), buckets(after_path, series)
parts = []
for labels in sorted(after):
    b, a = before.get(labels, {}), after[labels]
    if a[float("inf")] - b.get(float("inf"), 0) == 0: continue
    name = labels.rstrip(",").replace('"', "") + " " if labels else ""
    parts.append(f"{name}p50 {quantile(b, a, 0.5) * 1000:.1f} ms, p99 {quantile(b, a, 0.99) * 1000:.1f} ms")
print("; ".join(parts))
PY
}

# run LEDGER LATENCY MAX_IN_FLIGHT JOBS PACED: prints "throughput|latency|peak"
run() {
    local ledger_kind="$1" latency="$2" in_flight="$3" count="$4" paced="$5"
    # The unit of this burst, measured just before it: the machine's speed moves within a run (a verification
    # took 59 to 66 us between bursts of one run), and the ratio is what compares.
    ecdsa_us="$(ecdsa_verify_us)"
    # run is called in $(...), a subshell: it starts and stops its own services, or they would outlive it.
    SERVICES_DIR=""; services_start_kafka 2>/dev/null
    services_start_postgres 2>/dev/null; pg_base="${POSTGRES_URL%/*}"
    start_sim "$latency"
    local suffix; suffix="$(date +%s%N)"
    for topic in jobs results dlq; do
        .deps/tools/tansu topic create "$topic-$suffix" --partitions 4 --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null
    done
    local ledger="sqlite:$work/ledger-$suffix.sqlite"
    metrics_port="$(free_port)"
    if [ "$ledger_kind" = postgresql ]; then
        psql "$POSTGRES_URL" -qtAc "CREATE DATABASE bench_$suffix" >/dev/null
        ledger="$pg_base/bench_$suffix"
    fi
    cat >"$work/worker.properties" <<PROPS
apple.bundle_id=com.example
apple.verify_receipt.production_url=$apple/production/verifyReceipt
apple.verify_receipt.sandbox_url=$apple/sandbox/verifyReceipt
apple.allow_insecure_urls=true
apple.root_certificates=$work/root.pem
$apple_properties
ledger.url=$ledger
topics.jobs=jobs-$suffix
topics.results=results-$suffix
topics.dlq=dlq-$suffix
worker.max_in_flight=$in_flight
kafka.bootstrap.servers=$KAFKA_BOOTSTRAP
kafka.group.id=bench-$suffix
kafka.session.timeout.ms=6000
kafka.heartbeat.interval.ms=500
kafka.max.poll.interval.ms=10000
metrics.listen=127.0.0.1:$metrics_port
${OTEL_ENDPOINT:+otel.endpoint=$OTEL_ENDPOINT}
PROPS
    "$bench" prepare --bootstrap "$KAFKA_BOOTSTRAP" --sim "$sim" --topic "jobs-$suffix" --jobs "$count" \
        --proof "${PROOF:-receipt}" >/dev/null
    LOG_LEVEL=warning "${WORKER_BIN:-.build/release/receipt-worker}" run --config "$work/worker.properties" 2>"$work/worker.log" &
    worker_pid=$!
    local before; before="$(cpu_snapshot)"
    local perf_pid=""
    if [ -n "${PERF:-}" ]; then  # PERF=FILE: a perf profile of the worker during the burst, as FILE
        perf record -F "${PERF_FREQUENCY:-499}" ${PERF_CALL_GRAPH:--g} -p "$worker_pid" -o "$PERF-$ledger_kind-$latency.data" >/dev/null 2>&1 &
        perf_pid=$!
    fi
    local count_pid=""
    if [ "${MALLOCS:-no}" = yes ]; then  # every call of malloc by the worker during the burst, counted
        local jemalloc_event=(); perf probe -l 2>/dev/null | grep -q 'probe_jemalloc:jemalloc ' && jemalloc_event=(-e probe_jemalloc:jemalloc)
        perf stat -x, -e probe_libc:malloc -e probe_libc:mallocsz --filter 'bytes > 1032' "${jemalloc_event[@]}" \
            -p "$worker_pid" -o "$work/mallocs" >/dev/null 2>&1 &
        count_pid=$!
    fi
    local copies_pid=""
    if [ "${WAL_PAGES:-no}" = yes ] && [ "$ledger_kind" = sqlite ]; then
        copy_wal "$work/ledger-$suffix.sqlite" "$work/wal-copies" &
        copies_pid=$!
    fi
    local throughput; throughput="$("$bench" drain --bootstrap "$KAFKA_BOOTSTRAP" --topic "results-$suffix" --jobs "$count")"
    [ -n "$perf_pid" ] && { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
    if [ -n "$copies_pid" ]; then
        kill "$copies_pid" 2>/dev/null; wait "$copies_pid" 2>/dev/null || true
        echo "  $ledger_kind ${latency} ms, the ledger's group commits: $(python3 scripts/lib/wal-pages.py \
            "$work/ledger-$suffix.sqlite" "$work/wal-copies")" >&2
        rm -rf "$work/wal-copies"
    fi
    if [ -n "$count_pid" ]; then
        kill -INT "$count_pid"; wait "$count_pid" || true
        echo "  $ledger_kind ${latency} ms, allocations: $(awk -F, -v jobs="$count" '
            /probe_libc:malloc,/ {all = $1} /probe_libc:mallocsz/ {large = $1} /probe_jemalloc:jemalloc/ {je = $1}
            END {
                if (all == "") { printf "not counted (perf stat gave no count)"; exit }
                if (je + 0 > all + 0) { printf "%.0f mallocs per job (jemalloc'"'"'s)", je / jobs; exit }
                printf "%.0f mallocs per job, %.1f of them over 1032 bytes (past glibc'"'"'s per-thread cache)", all / jobs, large / jobs
            }' "$work/mallocs")" >&2
    fi
    # Where the burst's time went inside the worker (its metrics start at zero with the process).
    curl -s "http://127.0.0.1:$metrics_port/metrics" >"$work/metrics-burst"
    : >"$work/metrics-empty"
    echo "  $ledger_kind ${latency} ms, burst: job $(worker_quantiles "$work/metrics-empty" "$work/metrics-burst" receipt_worker_job_duration_seconds); $(worker_quantiles "$work/metrics-empty" "$work/metrics-burst" 'receipt_worker_(?:stage|apple_request)_duration_seconds')" >&2
    echo "  $ledger_kind ${latency} ms, ${PROOF:-receipt} jobs, $(cpu_per_job "$before" "$(cpu_snapshot)" "$count")" >&2
    local latency_line="-"
    if [ "$paced" = yes ]; then
        local rate; rate=$(( $(grep -oE '^[0-9]+' <<<"$throughput") / ${PACED_DIVISOR:-2} ))
        curl -s "http://127.0.0.1:$metrics_port/metrics" >"$work/metrics-before"
        latency_line="$("$bench" paced --bootstrap "$KAFKA_BOOTSTRAP" --sim "$sim" --topic "jobs-$suffix" --proof "${PROOF:-receipt}" \
            --results "results-$suffix" --rate "$rate" --seconds 10)"
        curl -s "http://127.0.0.1:$metrics_port/metrics" >"$work/metrics-after"
        latency_line="$latency_line; in the worker $(worker_quantiles "$work/metrics-before" "$work/metrics-after" receipt_worker_job_duration_seconds)"
        echo "  $ledger_kind ${latency} ms, stages: $(worker_quantiles "$work/metrics-before" "$work/metrics-after" 'receipt_worker_(?:stage|apple_request)_duration_seconds')" >&2
    fi
    local peak; peak="$(awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' "/proc/$worker_pid/status")"
    kill -TERM "$worker_pid"; wait "$worker_pid" || true; worker_pid=""
    stop_sim
    services_stop
    echo "$throughput|$latency_line|$peak"
}

# Two apps under Apple's rate limit: the simulator answers 429 past 50 Get Transaction Info requests a second
# per app and environment (Apple's limit), and the worker (one replica) is told the same limit. COUNT
# transaction-id jobs of each app, queued together, at 100 ms of Apple latency, PostgreSQL.
# Prints "jobs/s|lane: most requests in any second, requests, 429s; ...".
two_apps() {
    local count="$1"
    SERVICES_DIR=""; services_start_kafka 2>/dev/null
    services_start_postgres 2>/dev/null; pg_base="${POSTGRES_URL%/*}"
    TLS=no start_sim 100  # over cleartext whatever TLS says: what it measures is Apple's rate limit per app
    curl -sf -X PUT "$sim/admin/faults" -d '{"latency_ms": 100, "rate_limit_per_second": 50}' >/dev/null
    curl -sf -X POST "$sim/admin/apps" -d '{"bundle_id": "com.example.second", "app_apple_id": 2222222222}' >/dev/null
    local suffix; suffix="$(date +%s%N)"
    for topic in jobs results dlq; do
        .deps/tools/tansu topic create "$topic-$suffix" --partitions 4 --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null
    done
    psql "$POSTGRES_URL" -qtAc "CREATE DATABASE bench_$suffix" >/dev/null
    cat >"$work/worker.properties" <<PROPS
apple.bundle_id=com.example
$(services_simulator_properties "$work")
apple.api.max_requests_per_second=50
apple.transaction_id_requires_account_token=false
apps.second.bundle_id=com.example.second
ledger.url=$pg_base/bench_$suffix
topics.jobs=jobs-$suffix
topics.results=results-$suffix
topics.dlq=dlq-$suffix
kafka.bootstrap.servers=$KAFKA_BOOTSTRAP
kafka.group.id=bench-$suffix
PROPS
    "$bench" prepare --bootstrap "$KAFKA_BOOTSTRAP" --sim "$sim" --topic "jobs-$suffix" --jobs "$count" \
        --proof transaction_id --prefix a >/dev/null
    "$bench" prepare --bootstrap "$KAFKA_BOOTSTRAP" --sim "$sim" --topic "jobs-$suffix" --jobs "$count" \
        --proof transaction_id --bundle-id com.example.second --prefix b >/dev/null
    LOG_LEVEL=warning "${WORKER_BIN:-.build/release/receipt-worker}" run --config "$work/worker.properties" 2>"$work/worker.log" &
    worker_pid=$!
    local throughput
    throughput="$("$bench" drain --bootstrap "$KAFKA_BOOTSTRAP" --topic "results-$suffix" --jobs $((2 * count)))"
    curl -s "$sim/admin/stats" >"$work/stats"
    curl -s "$sim/admin/stats/times" >"$work/times"
    kill -TERM "$worker_pid"; wait "$worker_pid" || true; worker_pid=""
    stop_sim
    services_stop
    echo "$throughput|$(python3 - "$work/stats" "$work/times" <<'PY'
import json, sys
requests, times = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
parts = []
for lane in sorted(times):
    served = sorted(times[lane])
    busiest = max((sum(1 for t in served[i:] if t - served[i] < 1000) for i in range(len(served))), default=0)
    refused = requests.get(lane, 0) - len(served)
    parts.append(f"{lane}: at most {busiest} requests in any second, {requests.get(lane, 0)} requests, {refused} answered 429")
print("; ".join(parts))
PY
)"
}

# BASELINE_BIN=PATH: this build against another (an earlier release's receipt-worker), alternating bursts in one run
# (ROUNDS pairs, default 2; the first of LEDGERS, default sqlite, and of LATENCIES, default 100 ms), each burst's
# jobs/s and CPU per job, the worker's also in ECDSA verifications, each burst's measured just before it.
if [ -n "${BASELINE_BIN:-}" ]; then
    if ! baseline_version="$("$BASELINE_BIN" --version)"; then
        echo "BASELINE_BIN=$BASELINE_BIN does not run (above: why)" >&2
        exit 2
    fi
    ledger="${LEDGERS:-sqlite}"; ledger="${ledger%% *}"
    latency="${LATENCIES:-100}"; latency="${latency%% *}"
    # The checkout's commit beside --version's: a development build's --version names the commit SwiftPM last read
    # the manifest at, which can be an earlier one.
    checkout="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    git diff --quiet HEAD 2>/dev/null || checkout="$checkout with uncommitted changes"
    echo "This build ($(.build/release/receipt-worker --version), built from $checkout) against $baseline_version," \
        "alternating: $jobs" \
        "${PROOF:-receipt} jobs a burst, $ledger, Apple at $latency ms, worker.max_in_flight=1000"
    for round in $(seq "${ROUNDS:-2}"); do
        for build in baseline this; do
            bin=.build/release/receipt-worker
            [ "$build" = baseline ] && bin="$BASELINE_BIN"
            IFS='|' read -r throughput _ _ <<<"$(WORKER_BIN="$bin" run "$ledger" "$latency" 1000 "$jobs" no 2>"$work/burst")"
            printf '  round %s, %-9s %-32s %s\n' "$round" "$build:" "$throughput" \
                "$(grep -o 'CPU per job.*' "$work/burst")$(sed -n 's/.*, allocations: /; allocations: /p' "$work/burst")"
        done
    done
    exit 0
fi

echo "Worker benchmark: $jobs jobs per configuration, 4 partitions, worker.max_in_flight=1000, 2 cores shared by"
echo "broker, simulator, PostgreSQL, worker and driver"
printf '%-11s %-8s %-34s %-96s %s\n' ledger latency throughput "latency at half throughput: submit -> result; in the worker: taken -> result acked" "worker peak RSS"
declare -A rates
for PROOF in ${PROOFS:-${PROOF:-receipt}}; do
    [ -n "${PROOFS:-}" ] && echo "jobs proving their purchase with: $PROOF"
    for ledger in ${LEDGERS:-sqlite postgresql}; do
        for latency in ${LATENCIES:-0 100}; do
            IFS='|' read -r throughput latency_line peak <<<"$(run "$ledger" "$latency" 1000 "$jobs" "${PACED:-yes}")"
            rates["$ledger-$latency"]="$(grep -oE '^[0-9]+' <<<"$throughput")"
            last_rate="${rates["$ledger-$latency"]}"
            printf '%-11s %-8s %-34s %-96s %s\n' "$ledger" "${latency} ms" "$throughput" "$latency_line" "$peak"
        done
    done
done
# The floor under the latency: the broker alone, with the worker's producer and consumer settings, at
# half the last configuration's throughput. A job crosses it twice (job in, result out).
# Then two such streams at once, as in the benchmark (jobs in, results out: two producers, two consumers).
(
    SERVICES_DIR=""; services_start_kafka 2>/dev/null
    for topic in hop hop-a hop-b; do
        .deps/tools/tansu topic create "$topic" --partitions 4 --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null
    done
    half=$(( ${last_rate:-2000} / 2 ))
    echo "broker alone, one stream: $("$bench" hop --bootstrap "$KAFKA_BOOTSTRAP" --topic hop --rate "$half" --seconds 10)"
    "$bench" hop --bootstrap "$KAFKA_BOOTSTRAP" --topic hop-a --rate "$half" --seconds 10 >"$work/hop-a" &
    first_pid=$!
    second="$("$bench" hop --bootstrap "$KAFKA_BOOTSTRAP" --topic hop-b --rate "$half" --seconds 10)"
    wait "$first_pid"  # not a bare wait: the broker is a background job of this subshell too
    echo "broker alone, two streams at once: $(cat "$work/hop-a") | $second"
    services_stop
)
if [ "${TWO_APPS:-yes}" = yes ]; then
    echo
    per_app="${TWO_APP_JOBS:-1500}"
    echo "Two apps, $per_app transaction-id jobs each, Apple's limit of 50 requests a second per app enforced by the"
    echo "simulator (429 past it) and configured in the worker (apple.api.max_requests_per_second=50), 100 ms, PostgreSQL:"
    IFS='|' read -r throughput lanes <<<"$(two_apps "$per_app")"
    echo "  $throughput"
    tr ';' '\n' <<<"$lanes" | sed 's/^ */  /'
fi
[ "${NAIVE:-yes}" = no ] && exit 0
echo
echo "Naive design (worker.max_in_flight=1, one job at a time), PostgreSQL:"
for latency in 0 100; do
    count=$([ "$latency" = 0 ] && echo 2000 || echo 100)
    IFS='|' read -r throughput _ peak <<<"$(run postgresql "$latency" 1 "$count" no)"
    naive="$(grep -oE '^[0-9]+' <<<"$throughput")"
    printf '  %-7s %-34s concurrent/naive = %sx\n' "${latency} ms" "$throughput" \
        "$(python3 -c "print(round(${rates[postgresql-$latency]} / max($naive, 1), 1))")"
done
