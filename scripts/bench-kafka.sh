#!/usr/bin/env bash
# Kafka benchmark: N messages of 1 KiB produced and consumed through the Swift Kafka layer and through
# librdkafka's own rdkafka_performance, in the same run. Prints the median msgs/s of each over R rounds
# and the Swift/C ratio.
#   scripts/bench-kafka.sh [MESSAGES] [ROUNDS]        (defaults 200000, 3)
#
# Tansu keeps every record in memory and slows down as it fills, so each measurement gets a fresh broker;
# clients run in alternating order across rounds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
messages="${1:-200000}"
rounds="${2:-3}"
partitions=4
bash scripts/setup.sh
swift build -c release --package-path Benchmarks --product kafka-bench >/dev/null
source scripts/lib/services.sh
trap services_stop EXIT
# librdkafka's examples are built only for this benchmark.
if [ -e .deps/librdkafka ]; then bash scripts/build-librdkafka.sh "$(readlink -f .deps/librdkafka)" .deps --examples; fi
perf=".deps/librdkafka/bin/rdkafka_performance"
[ -x "$perf" ] || perf="$(command -v rdkafka_performance)"

rate() {
    local value; value=$(grep -oE '[0-9]+ msgs/s' | tail -n 1 | grep -oE '^[0-9]+' || true)
    [ -n "$value" ] || { echo "[bench] no rate in the output" >&2; exit 1; }
    echo "$value"
}

fresh_broker() {
    services_stop
    services_start_kafka 2>/dev/null
    .deps/tools/tansu topic create bench --partitions "$partitions" --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null
}

declare -A results
record() { results[$1]="${results[$1]:-} $2"; }

run_c() {
    fresh_broker
    local common=(-b "$KAFKA_BOOTSTRAP" -t bench -s 1024 -c "$messages" -X enable.idempotence=true -X acks=all
        -X linger.ms=5)
    record c_produce "$("$perf" -P "${common[@]}" 2>/dev/null | rate)"
    record c_consume "$("$perf" -G "bench-c" "${common[@]}" -X session.timeout.ms=6000 \
        -X heartbeat.interval.ms=1000 -X max.poll.interval.ms=10000 -X auto.offset.reset=earliest 2>/dev/null | rate)"
}

run_swift() {
    fresh_broker
    local out; out=$(Benchmarks/.build/release/kafka-bench --bootstrap "$KAFKA_BOOTSTRAP" --topic bench --messages "$messages" \
        --mode "$1" 2>/dev/null)
    record "$1_produce" "$(grep produce <<<"$out" | rate)"
    record "$1_consume" "$(grep consume <<<"$out" | rate)"
}

median() { python3 -c "import statistics, sys; print(int(statistics.median(int(x) for x in sys.argv[1:])))" $1; }
ratio() { python3 -c "print(f'{$1 / $2 * 100:.0f} %')"; }

echo "Kafka layer benchmark: $messages messages of 1 KiB, $partitions partitions, idempotent, acks=all,"
echo "linger 5 ms, Tansu on loopback, fresh broker per measurement, median of $rounds rounds"
for ((round = 1; round <= rounds; round++)); do
    if ((round % 2)); then run_c; run_swift enqueue; run_swift send; else run_swift send; run_swift enqueue; run_c; fi
    echo "  round $round: C ${results[c_produce]##* }/${results[c_consume]##* }," \
        "Swift enqueue ${results[enqueue_produce]##* }/${results[enqueue_consume]##* }," \
        "Swift send ${results[send_produce]##* }/${results[send_consume]##* } (produce/consume msgs/s)"
done
for key in "${!results[@]}"; do results[$key]=$(median "${results[$key]}"); done
printf '%-46s %12s %12s\n' "" "produce/s" "consume/s"
printf '%-46s %12s %12s\n' "librdkafka rdkafka_performance (C)" "${results[c_produce]}" "${results[c_consume]}"
printf '%-46s %12s %12s\n' "Swift layer: enqueue + delivery callback" "${results[enqueue_produce]}" "${results[enqueue_consume]}"
printf '%-46s %12s %12s\n' "Swift layer: awaited send, 2,000 senders" "${results[send_produce]}" "${results[send_consume]}"
printf '%-46s %12s %12s\n' "ratio Swift enqueue / C" "$(ratio "${results[enqueue_produce]}" "${results[c_produce]}")" \
    "$(ratio "${results[enqueue_consume]}" "${results[c_consume]}")"
printf '%-46s %12s %12s\n' "ratio Swift send / C" "$(ratio "${results[send_produce]}" "${results[c_produce]}")" \
    "$(ratio "${results[send_consume]}" "${results[c_consume]}")"
