#!/usr/bin/env bash
# libFuzzer targets for the parsers that read what clients, Apple, proxies and files send: one executable
# (Fuzz/Fuzzer) runs the check `FUZZ_TARGET` names in Fuzz/FuzzChecks.
#   scripts/fuzz.sh [TARGET|all] [SECONDS]   each target, or TARGET alone, for SECONDS (default 60)
#   scripts/fuzz.sh --ci                 each target for a fixed number of runs from a fixed seed
#   scripts/fuzz.sh --merge [TARGET] [SECONDS]   fuzz, then minimise what was reached into Fuzz/Corpus/<Target>
#                                        (commit it: the test command replays it, Tests/FuzzReplayTests)
# TARGET: JobParser, SignedData, VerifyReceiptResponse, AppReceipt, AppleDates, HTTPRequestParser, Properties,
# ConsumptionAnswer, and the support desk's and the traces' parsers: DeskToken (a provider's JWT), JWKS, Cookies,
# Seal (a sealed sign-in state), DeskForms (the API's bodies), Traceparent, OCSPResponse (a responder's answer),
# ReadPlace (a parked or dead-lettered record's `parked_from` and `dlq_first_read`).
# Prints executions, seconds and the verdict per target; exits 1 when any target crashed, with the crashing
# input saved under Fuzz/Crashes/<Target>/. Replay one (the environment as set below):
#   FUZZ_TARGET=<Target> SWIFT_BACKTRACE=enable=no LSAN_OPTIONS=suppressions=Fuzz/lsan.supp .build-fuzz/debug/Fuzzer FILE
#
# The recipe. The fuzzer exists in Package.swift only when RECEIPT_WORKER_FUZZ=1, so the normal build and tests
# never see it; it is built in its own scratch path:
#   RECEIPT_WORKER_FUZZ=1 swift build -c debug --scratch-path .build-fuzz \
#       -Xswiftc -sanitize=fuzzer,address --product Fuzzer
# `-Xswiftc` instruments every module (the parsers' libraries too, or the fuzzer would run blind). What the
# Swift server projects usually add, `-Xswiftc -parse-as-library`, does not link here: on Linux SwiftPM
# links an executable's `main` to `<Target>_main` (`--defsym`), the symbol a main.swift's top-level code
# becomes, so a target without top-level code fails with "undefined symbol Fuzzer_main". Fuzz/Fuzzer/main.swift
# therefore exports `LLVMFuzzerTestOneInput` as libFuzzer expects and ends in top-level code that runs
# libFuzzer's driver, `LLVMFuzzerRunDriver` (declared in Fuzz/CLibFuzzer, linked
# by -sanitize=fuzzer). Debug, not release: assertions stay on, and the build is much quicker.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

targets=(JobParser SignedData VerifyReceiptResponse AppReceipt AppleDates HTTPRequestParser Properties ConsumptionAnswer
    DeskToken JWKS Cookies Seal DeskForms Traceparent OCSPResponse ReadPlace)
scratch=.build-fuzz
fixtures=Tests/AppleVerificationTests/Fixtures  # Apple's test vectors

# The longest input each target is given: the largest seed, or a little over what the input can usefully be.
max_len() {
    case "$1" in
    JobParser) echo 4096 ;;             # jobs.max_bytes is 256 KiB, but every branch is reached in a few hundred bytes
    SignedData) echo 4096 ;;            # a JWS with a three-certificate x5c is 2.5 KB
    VerifyReceiptResponse) echo 4096 ;;
    AppReceipt) echo 8192 ;;            # all fixture receipts but one (17 KB, cut short) fit; larger runs 3 times slower
    AppleDates) echo 256 ;;             # a date of 40 bytes is the longest read; 256 reaches every length check
    HTTPRequestParser) echo 2048 ;;
    Properties) echo 8192 ;;            # config/worker.properties is 5 KB
    ConsumptionAnswer) echo 1024 ;;     # an answer is a few hundred bytes (16 KB at most)
    DeskToken) echo 2048 ;;             # a provider's token is under a kilobyte; 16 KB are refused unread
    JWKS) echo 4096 ;;                  # a JWKS of a few RSA keys
    Cookies) echo 1024 ;;               # a browser's Cookie header; over 16 KB is not read
    Seal) echo 512 ;;                   # a sealed sign-in state is about 200 bytes
    DeskForms) echo 2048 ;;             # a body is at most 16 KB, every field well under a kilobyte
    Traceparent) echo 600 ;;            # at most 512 bytes are read
    OCSPResponse) echo 4096 ;;          # Apple's answers are about 1.5 KB
    ReadPlace) echo 400 ;;              # at most 300 bytes are read
    esac
}

# Runs for --ci: about 12 s per target (debug, ASan, one core of two), seeds included. Properties is slow per
# input: Foundation's trimmingCharacters on Linux goes through NSString.
ci_runs() {
    case "$1" in
    JobParser) echo 50000 ;;
    SignedData) echo 25000 ;;
    VerifyReceiptResponse) echo 250000 ;;
    AppReceipt) echo 10000 ;;
    AppleDates) echo 100000 ;;
    HTTPRequestParser) echo 30000 ;;
    Properties) echo 2000 ;;
    ConsumptionAnswer) echo 20000 ;;  # JSONDecoder per input
    DeskToken) echo 20000 ;;          # JSONSerialization and an ECDSA verification for a token that parses
    JWKS) echo 20000 ;;
    Cookies) echo 200000 ;;
    Seal) echo 100000 ;;
    DeskForms) echo 20000 ;;          # JSONSerialization and, for a credit accepted, two readings back
    Traceparent) echo 200000 ;;
    OCSPResponse) echo 50000 ;;
    ReadPlace) echo 200000 ;;
    esac
}

# Copies the seeds of target $1 into corpus directory $2: committed seeds (Fuzz/Seeds/<Target>) and fixtures.
seed() {
    local target=$1 corpus=$2 file
    if [[ -d Fuzz/Seeds/$target ]]; then cp Fuzz/Seeds/"$target"/* "$corpus"/; fi
    if [[ -d Fuzz/Corpus/$target ]]; then cp Fuzz/Corpus/"$target"/* "$corpus"/; fi
    case "$target" in
    SignedData)
        cp "$fixtures"/mock_signed_data/* "$corpus"/
        cp "$fixtures"/xcode/xcode-signed-* "$corpus"/
        ;;
    VerifyReceiptResponse)
        cp "$fixtures"/receipts/*_response.json "$corpus"/
        ;;
    AppReceipt)
        # The fuzz target reads its input as DER (and as an iOS 6 property list): the fixtures are base64.
        for file in "$fixtures"/receipts/*.b64 "$fixtures"/hostile/*.b64 "$fixtures"/xcode/xcode-app-receipt-*; do
            base64 -d -i "$file" >"$corpus/$(basename "$file" .b64).der"
            # The signed content alone, for the target's direct reading of the attribute SET (not for iOS 6).
            command -v openssl >/dev/null || continue
            openssl cms -verify -noverify -nosigs -binary -inform DER -in "$corpus/$(basename "$file" .b64).der" \
                -out "$corpus/$(basename "$file" .b64).payload" >/dev/null 2>&1 \
                || rm -f "$corpus/$(basename "$file" .b64).payload"
        done
        ;;
    Properties)
        cp config/*.properties "$corpus"/
        ;;
    esac
}

ci=false
merge=false
selected=("${targets[@]}")
seconds=60
if [[ "${1:-}" == "--merge" ]]; then
    merge=true
    shift
fi
if [[ "${1:-}" == "--ci" ]]; then
    ci=true
elif [[ $# -ge 1 ]]; then
    if [[ "$1" != all ]]; then
        name="${1#Fuzz}"
        [[ " ${targets[*]} " == *" $name "* ]] || { echo "fuzz.sh: unknown target $1 (${targets[*]})" >&2; exit 2; }
        selected=("$name")
    fi
    seconds="${2:-60}"
fi

# Swift's backtracer catches the trap before libFuzzer does, and under ASan it can hang instead of reporting
# (it reads the stack ASan has poisoned): off, so a Swift trap is a crash libFuzzer records, with ASan's stack.
export SWIFT_BACKTRACE=enable=no
# Leaks are looked for (OpenSSL handles are freed by hand), except globals LeakSanitizer cannot see (Fuzz/lsan.supp).
export LSAN_OPTIONS="suppressions=$PWD/Fuzz/lsan.supp:print_suppressions=0"

# Seconds since $1 (an $EPOCHREALTIME), to a tenth.
since() { awk -v from="$1" -v to="$EPOCHREALTIME" 'BEGIN { printf "%.1f", to - from }'; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

start=$EPOCHREALTIME
# The linker (gold) warns once per ASan helper symbol that it cannot export; those lines are noise.
if ! RECEIPT_WORKER_FUZZ=1 swift build -c debug --scratch-path "$scratch" -Xswiftc -sanitize=fuzzer,address \
    --product Fuzzer >"$work/build.log" 2>&1; then
    grep -v "Cannot export local symbol" "$work/build.log" >&2
    exit 1
fi
echo "built the fuzzer in $(since "$start") s"

failed=()
printf '%-22s %12s %8s  %s\n' target executions seconds result
for target in "${selected[@]}"; do
    corpus="$work/$target/corpus"
    artifacts="$work/$target/artifacts"
    mkdir -p "$corpus" "$artifacts"
    seed "$target" "$corpus"
    options=(-max_len="$(max_len "$target")" -print_final_stats=1 -timeout=10 -artifact_prefix="$artifacts/")
    if $ci; then
        options+=(-runs="$(ci_runs "$target")" -seed=1)
    else
        options+=(-max_total_time="$seconds")
    fi
    began=$EPOCHREALTIME
    status=0
    FUZZ_TARGET=$target "$scratch/debug/Fuzzer" "${options[@]}" "$corpus" >"$work/$target/log" 2>&1 || status=$?
    elapsed="$(since "$began")"
    executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$target/log")"
    if [[ $status -eq 0 ]]; then
        result="no crash"
    else
        failed+=("$target")
        mkdir -p "Fuzz/Crashes/$target"
        saved=()
        for artifact in "$artifacts"/*; do
            [[ -e "$artifact" ]] || continue
            cp "$artifact" "Fuzz/Crashes/$target/"
            saved+=("Fuzz/Crashes/$target/$(basename "$artifact")")
        done
        result="CRASH (exit $status): ${saved[*]:-no input saved}"
    fi
    if $merge && [[ $status -eq 0 ]]; then
        # The smallest set of inputs that reaches what the whole corpus reached, as the committed corpus.
        minimized="$work/$target/minimized"
        mkdir -p "$minimized"
        FUZZ_TARGET=$target "$scratch/debug/Fuzzer" -merge=1 -max_len="$(max_len "$target")" "$minimized" "$corpus" \
            >"$work/$target/merge.log" 2>&1
        rm -rf "Fuzz/Corpus/$target"
        mkdir -p "Fuzz/Corpus/$target"
        cp "$minimized"/* "Fuzz/Corpus/$target/" 2>/dev/null || true
        result="$result; corpus $(ls "Fuzz/Corpus/$target" | wc -l) inputs"
    fi
    printf '%-22s %12s %8s  %s\n' "$target" "${executions:-?}" "$elapsed" "$result"
    if [[ $status -ne 0 ]]; then
        # The sanitizer's or Swift's report, without libFuzzer's progress lines.
        grep -v -E '^#[0-9]+|^INFO:' "$work/$target/log" | head -60 >&2 || true
    fi
done
echo "total $(since "$start") s"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz.sh: crashed: ${failed[*]}" >&2
    exit 1
fi
