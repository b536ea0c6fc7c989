#!/usr/bin/env bash
# What each feature that runs on every job costs it, in one run: a burst of receipt jobs (SQLite, Apple at 100 ms,
# 1,000 in flight) profiled with perf, and each feature's share of the worker's samples (a sample counts for a
# feature when one of the feature's functions is on its stack) times the worker's CPU per job measured in the same
# burst. Features: the revocation check's cache lookup, the player-wait tracker, the money metrics, and tracing while
# it is off (the current span looked up where spans would be made).
#   scripts/bench-features.sh [JOBS]      (default 20000)
# A feature under 0.2 % of the samples (some twenty samples of 20,000 jobs) is within the sampling's noise: the
# line says so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${1:-20000}"
command -v perf >/dev/null || { echo "perf is not installed (Debian: linux-perf)" >&2; exit 2; }
profile="$(mktemp -d)/features"
trap 'rm -rf "$(dirname "$profile")"' EXIT
# profile PROOF: one profiled burst of JOBS jobs proving their purchase so; prints its figures.
profile() {
    PERF="$profile-$1" PERF_FREQUENCY=2000 PROOF="$1" LEDGERS=sqlite LATENCIES=100 NAIVE=no TWO_APPS=no \
        bash scripts/bench-worker.sh "$jobs" 2>"$profile.log" >"$profile.out"
    local cpu_line; cpu_line="$(grep -o 'CPU per job (us): worker [0-9]*.*' "$profile.log" | head -n 1)"
    grep -m 1 '^ECDSA' "$profile.out" || true  # the unit of this burst, measured by bench-worker.sh
    echo "$1 jobs: $(grep -E '^sqlite' "$profile.out" | awk '{print $4, $5}'), SQLite, Apple at 100 ms; ${cpu_line%%; worker wrote*}"
    perf script -i "$profile-$1-sqlite-100.data" -F ip,sym 2>/dev/null | python3 -c "$count" \
        "$(grep -oE 'worker [0-9]+' <<<"$cpu_line" | grep -oE '[0-9]+')"
}
count="$(cat <<'PY'
import sys
worker_us = float(sys.argv[1])
# Substrings of each feature's functions (their mangled names). Each does its own work and calls only what serves
# it, so a sample with one of them on its stack is the feature's; the wrappers that run the job's work inside a span
# (inChild, inCurrentChild, run) are left out, or they would claim the job's work as tracing's.
features = [
    ("revocation check, cache lookup", ["17RevocationCheckerC"]),
    ("player-wait tracker", ["11WaitTrackerC"]),
    ("money metrics", ["12MoneyMetricsV", "10EventMoneyV"]),
    ("tracing, off (current span looked up)", [
        "4SpanC7current", "6TracerC5start", "11processSpan", "4SpanC5child", "4SpanC3end", "4SpanC3set",
    ]),
]
samples, counts, stack = 0, [0] * len(features), []
def close():
    global samples
    if not stack:
        return
    samples += 1
    for index, (_, patterns) in enumerate(features):
        if any(p in frame for frame in stack for p in patterns):
            counts[index] += 1
for line in sys.stdin:
    line = line.strip()
    if not line:
        close()
        stack.clear()
    else:
        stack.append(line)
close()
print(f"{samples} samples of the worker during the burst")
for (name, _), count in zip(features, counts):
    share = count / max(samples, 1)
    note = "  (within the sampling's noise)" if share < 0.002 else ""
    print(f"  {name:<40} {share * 100:5.2f} % of samples  {share * worker_us:6.1f} us a job{note}")
PY
)"
profile receipt
profile signed_transaction
