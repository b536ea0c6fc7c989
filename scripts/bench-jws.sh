#!/usr/bin/env bash
# Signed-transaction (JWS) verifications per second on one core: the Swift verifier with its chain cache,
# the same with the revocation check's cached answer looked up at each verification (apple.revocation_check),
# the Swift verifier verifying the chain every time, and Apple's App Store Server Library for Python
# (SignedDataVerifier, online checks off) on the same JWS, signed with Apple's test chain.
#   scripts/bench-jws.sh [SECONDS]   (default 3 per measurement)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds="${1:-3}"
bash scripts/setup.sh
venv=.deps/bench-venv
if [ ! -x "$venv/bin/python" ] || ! cmp -s scripts/requirements-bench.txt "$venv/requirements.txt"; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --require-hashes -r scripts/requirements-bench.txt
    cp scripts/requirements-bench.txt "$venv/requirements.txt"
fi
swift build -c release --package-path Benchmarks --product jws-bench >/dev/null
chain=Tests/AppleVerificationTests/Fixtures/chain
jws="$(mktemp)"
trap 'rm -f "$jws"' EXIT
Benchmarks/.build/release/jws-bench make --key "$chain/testLeaf.key" \
    --chain "$chain/testLeaf.pem,$chain/testIntermediate.pem,$chain/testCA.pem" --out "$jws"
root="$chain/root_ca.der"
rate() { grep -oE '^[0-9]+'; }
swift_cached=$(taskset -c 0 Benchmarks/.build/release/jws-bench verify --jws "$jws" --root "$root" --seconds "$seconds" | rate)
swift_revocation=$(taskset -c 0 Benchmarks/.build/release/jws-bench verify --jws "$jws" --root "$root" --seconds "$seconds" --revocation | rate)
swift_uncached=$(taskset -c 0 Benchmarks/.build/release/jws-bench verify --jws "$jws" --root "$root" --seconds "$seconds" --no-cache | rate)
forged=$(taskset -c 0 Benchmarks/.build/release/jws-bench forged --jws "$jws" --root "$root" --seconds "$seconds" \
    --forger-key "$chain/testIntermediate.key" | rate)
python=$(taskset -c 0 "$venv/bin/python" scripts/bench-jws.py "$jws" "$root" "$seconds" | rate)
ratio() { python3 -c "print(f'{$1 / $2:.1f}x')"; }
echo "Signed-transaction verifications per second, one core, ES256 + 3-certificate x5c, full payload decode"
printf '%-58s %10s\n' "Swift SignedDataVerifier, chain cache" "$swift_cached"
printf '%-58s %10s\n' "Swift SignedDataVerifier, cache, revocation answer looked up" "$swift_revocation"
printf '%-58s %10s\n' "Swift SignedDataVerifier, chain verified every time" "$swift_uncached"
printf '%-58s %10s\n' "Forgeries refused: Apple's chain, a header of their own" "$forged"
printf '%-58s %10s\n' "CPU per forgery / CPU per genuine (cached)" "$(python3 -c "print(f'{$swift_cached / $forged:.2f}')")"
printf '%-58s %10s\n' "Apple app-store-server-library 3.1.2 (Python, no cache offline)" "$python"
printf '%-58s %10s\n' "ratio Swift cached / Python" "$(ratio "$swift_cached" "$python")"
printf '%-58s %10s\n' "ratio Swift uncached / Python" "$(ratio "$swift_uncached" "$python")"
