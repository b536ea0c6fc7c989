#!/usr/bin/env bash
# What tracing costs in the worker's own code: a sampled job's five spans made, ended, queued and encoded as OTLP,
# against the same job unsampled, in one process (Benchmarks/Sources/SpanBench), beside the cost of one ECDSA P-256
# verification on this machine now. scripts/bench-tracing.sh measures the whole worker with tracing off and on;
# at a few microseconds its difference is within that benchmark's noise, which this one is not.
#   scripts/bench-spans.sh [JOBS]     (default 200000)
# SPAN_BENCH=PATH runs that span-bench binary (another commit's), to compare two builds in one run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${1:-200000}"
bash scripts/setup.sh
swift build -c release --package-path Benchmarks --product span-bench >/dev/null
source scripts/lib/ecdsa.sh
echo "ECDSA P-256: one verification costs $(ecdsa_verify_us) us on this machine now (openssl speed ecdsap256, one core)"
"${SPAN_BENCH:-Benchmarks/.build/release/span-bench}" --jobs "$jobs"
