#!/usr/bin/env bash
# The SQLite ledger alone, in process, as the worker drives it (a lookup, then a grant and its result row, 1,000
# jobs in flight, decisions committed in groups): CPU and bytes written per decision, beside the cost of one
# ECDSA P-256 verification on this machine now, the unit of the benchmarks' CPU figures (docs/benchmarks.md).
#   scripts/bench-ledger.sh [DECISIONS] [PREFILL]     (default 30000 after 0)
# LEDGER_BENCH=PATH runs that ledger-bench binary (another commit's), to compare two builds in one run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
decisions="${1:-30000}"
prefill="${2:-0}"
bash scripts/setup.sh
swift build -c release --package-path Benchmarks --product ledger-bench >/dev/null
bench="${LEDGER_BENCH:-Benchmarks/.build/release/ledger-bench}"
source scripts/lib/ecdsa.sh
ecdsa_us="$(ecdsa_verify_us)"
echo "ECDSA P-256: one verification costs ${ecdsa_us} us on this machine now (openssl speed ecdsap256, one core)"
line="$("$bench" --decisions "$decisions" --prefill "$prefill")"
per_decision="$(sed -nE 's/.*CPU per decision ([0-9.]+) us.*/\1/p' <<<"$line")"
if [ -z "$ecdsa_us" ] || [ -z "$per_decision" ]; then
    echo "$line"
    echo "bench-ledger: no ECDSA cost or CPU per decision to divide (openssl speed printed nothing?)" >&2
    exit 1
fi
echo "$line (= $(python3 -c "print(f'{$per_decision / $ecdsa_us:.2f}')") ECDSA verifications)"
