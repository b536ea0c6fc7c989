#!/usr/bin/env bash
# HTTP requests per second from HTTPClient (libcurl multi) to the App Store simulator's verifyReceipt, in
# separate processes on this machine, at 0 ms and at 100 ms of simulated Apple latency.
#   scripts/bench-http.sh [IN_FLIGHT] [SECONDS]     (defaults 1000, 5)
# Beside each rate: the client's CPU per request, and in ECDSA P-256 verifications measured in the same run
# (scripts/lib/ecdsa.sh; a receipt job's call to Apple costs at least this). HTTP_BENCH=PATH runs that http-bench
# binary (another commit's), to compare two clients against the same simulator. CLIENTS="curl raw" also measures
# http-bench's raw client (HTTP/1.1 on epoll, cleartext, no libcurl: the floor of a client of our own), alternating
# with the worker's, at each latency. PER_HOST=512 limits the client's connections to the simulator (as
# http.max_connections_per_host does), so that with more in flight requests wait for one. TLS=yes sends the
# requests over TLS, HTTP/2 offered by ALPN as Apple's endpoints do, through nghttpx in front of the simulator
# (scripts/lib/services.sh; not with CLIENTS, whose raw client is cleartext only, and HTTP_BENCH's binary must know
# http-bench's --ca-file).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
in_flight="${1:-1000}"
seconds="${2:-5}"
bash scripts/setup.sh
swift build -c release --product appstore-sim >/dev/null
swift build -c release --package-path Benchmarks --product http-bench >/dev/null
source scripts/lib/services.sh
work="$(mktemp -d)"
SIM_PID="" TLS_PID=""
trap 'kill $SIM_PID $TLS_PID 2>/dev/null; wait $SIM_PID $TLS_PID 2>/dev/null; rm -rf "$work"' EXIT
services_start_simulator "$work"
base="$SIM_URL"
# Where the client sends its requests, and the certificate it trusts there.
target="$base" tls_options=()
if [ "${TLS:-no}" = yes ]; then
    [ "${CLIENTS:-curl}" = curl ] || { echo "TLS=yes measures the worker's client alone: leave CLIENTS unset" >&2; exit 2; }
    services_start_tls_front "$base" "$work"
    target="$TLS_URL" tls_options=(--ca-file "$TLS_CA_FILE")
fi
receipt="$(curl -sf -X POST "$base/admin/purchases" -d '{"product_id":"coins.100"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["receipt"])')"
body="{\"receipt-data\":\"$receipt\"}"

run() {
    curl -sf -X PUT "$base/admin/faults" -d "{\"latency_ms\": $1}" >/dev/null
    "${HTTP_BENCH:-Benchmarks/.build/release/http-bench}" --url "$target/production/verifyReceipt" --body "$body" \
        --in-flight "$in_flight" --seconds "$seconds" --client "${2:-curl}" --per-host "${PER_HOST:-0}" \
        "${tls_options[@]}"
}
if [ "${TLS:-no}" = yes ]; then
    echo "HTTP client -> TLS front (nghttpx, HTTP/2 offered) -> simulator verifyReceipt, $in_flight in flight, ${seconds} s each"
else
    echo "HTTP client -> simulator verifyReceipt, $in_flight in flight, ${seconds} s each (HTTP/1.1 keep-alive on loopback)"
fi
source scripts/lib/ecdsa.sh
ecdsa_us="$(ecdsa_verify_us)"
# Appends "= N ECDSA verifications" to http-bench's line.
in_ecdsa() {
    local cpu
    cpu="$(sed -nE 's/.*client CPU ([0-9.]+) us per request.*/\1/p' <<<"$1")"
    if [ -n "$cpu" ] && [ -n "$ecdsa_us" ]; then
        echo "$1 (= $(python3 -c "print(f'{$cpu / $ecdsa_us:.2f}')") ECDSA verifications of ${ecdsa_us} us)"
    else
        echo "$1"
    fi
}
clients="${CLIENTS:-curl}"
if [ "$clients" != curl ]; then
    for latency in 0 100; do
        for client in $clients; do
            printf '%-34s %s\n' "$client, ${latency} ms simulated latency" "$(in_ecdsa "$(run "$latency" "$client")")"
        done
    done
fi
zero=$(in_ecdsa "$(run 0)")
slow=$(in_ecdsa "$(run 100)")
ideal=$((in_flight * 10))
slow_rate=$(grep -oE '^[0-9]+' <<<"$slow")
printf '%-34s %s\n' "0 ms simulated latency" "$zero"
printf '%-34s %s\n' "100 ms simulated latency" "$slow"
printf '%-34s %s requests/s\n' "ideal at 100 ms (in flight / 0.1 s)" "$ideal"
printf '%-34s %s\n' "achieved / ideal at 100 ms" "$(python3 -c "print(f'{$slow_rate / $ideal * 100:.0f} %')")"
