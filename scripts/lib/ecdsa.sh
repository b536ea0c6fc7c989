# The unit of the benchmarks' CPU figures (docs/benchmarks.md). Source this file, then:
#   ecdsa_us="$(ecdsa_verify_us)"
# The cost in µs of one ECDSA P-256 verification on this machine now (one core, OpenSSL's own loop, 3 s):
# the machine's speed moves by a factor of two between days, so CPU per job is stated in this, measured in
# the same run. Empty when openssl speed printed nothing.
ecdsa_verify_us() {
    openssl speed -seconds 3 ecdsap256 2>/dev/null | awk '/256 bits ecdsa \(nistp256\)/ {printf "%.1f", 1e6 / $NF}'
}
