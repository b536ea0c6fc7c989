#!/usr/bin/env bash
# Hunts the tests that fail once in a while: the whole Swift suite, as the test command runs it
# (scripts/lib/swift-suite.sh), RUNS times, the last BUSY of them with every core spinning beside it (a busy CI
# machine, another build). A test that fails once is a bug to find at its cause, never a retry to add.
#   scripts/flake-hunt.sh [RUNS] [BUSY]     default 5 runs, 2 of them busy
# Prints one line per run (its time, whether the cores were busy, the tests that failed) and a summary; exits 1
# when any run failed. Each failed run's output is kept in the directory it names.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs="${1:-5}"
busy="${2:-2}"
[[ "$runs" =~ ^[0-9]+$ && "$busy" =~ ^[0-9]+$ && "$busy" -le "$runs" ]] || {
    echo "usage: scripts/flake-hunt.sh [RUNS] [BUSY <= RUNS]" >&2
    exit 2
}
bash scripts/setup.sh
swift build --build-tests >/dev/null
kept="$(mktemp -d "${TMPDIR:-/tmp}/flake-hunt.XXXXXX")"
spinners=()
stop_spinning() {
    for pid in "${spinners[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${spinners[@]}"; do wait "$pid" 2>/dev/null || true; done
    spinners=()
}
trap stop_spinning EXIT
failed_runs=0
printf '%-4s %-5s %8s  %s\n' run busy seconds result
for run in $(seq 1 "$runs"); do
    cores="idle"
    if ((run > runs - busy)); then
        cores="busy"
        for _ in $(seq 1 "$(nproc)"); do
            bash -c 'while :; do :; done' &
            spinners+=($!)
        done
    fi
    log="$kept/run-$run.log"
    started=$SECONDS
    if bash scripts/lib/swift-suite.sh >"$log" 2>&1; then
        result="green ($(grep -Eo 'Test run with [0-9]+ tests' "$log" | awk '{sum += $4} END {print sum}') tests)"
        rm -f "$log"
    else
        failed_runs=$((failed_runs + 1))
        failures="$(grep -E '^✘ Test .* (recorded an issue|failed)' "$log" | sed -E 's/^✘ Test "([^"]*)".*/\1/' | sort -u |
            head -5 | paste -sd ';' -)"
        result="FAILED: ${failures:-see the log} ($log)"
    fi
    stop_spinning
    printf '%-4s %-5s %8s  %s\n' "$run" "$cores" "$((SECONDS - started))" "$result"
done
echo "$((runs - failed_runs)) of $runs runs green ($busy with every core busy)"
[[ "$failed_runs" -eq 0 ]] && rm -rf "$kept"
[[ "$failed_runs" -eq 0 ]]
