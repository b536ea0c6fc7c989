public import Kafka

extension WorkerConfiguration {
    /// The consumer's and the producer's librdkafka configuration: `kafka.*` as given, over the worker's defaults.
    public func kafkaClients() throws -> (
        consumer: KafkaConsumer.Configuration, producer: KafkaProducer.Configuration
    ) {
        var kafka = self.kafka
        guard let bootstrap = kafka.removeValue(forKey: "bootstrap.servers"),
            let group = kafka.removeValue(forKey: "group.id")
        else {
            throw ConfigurationError(
                .missingKey, key: "kafka.bootstrap.servers",
                reason: "kafka.bootstrap.servers and kafka.group.id are required")
        }
        // Bound what librdkafka prefetches, so memory stays flat when Apple is slow and intake pauses; and
        // answer fetches quickly: librdkafka's 500 ms fetch wait would sit in every job's latency.
        var consumerProperties = ["queued.max.messages.kbytes": "16384", "fetch.wait.max.ms": "10"]
        consumerProperties.merge(kafka) { _, configured in configured }
        // Events and notifications are awaited one by one, but thousands are in flight: 5 ms of batching
        // (librdkafka's default) halves the produce requests the broker handles at a notification burst,
        // which gave the receiver a fifth more notifications a second than 1 ms (docs/benchmarks.md).
        let producerProperties = ["linger.ms": "5"].merging(kafka.filter { !Self.consumerOnly.contains($0.key) }) {
            $1
        }
        var consumer = KafkaConsumer.Configuration(
            bootstrapServers: bootstrap, groupID: group, properties: consumerProperties)
        // A revocation waits for the drain: librdkafka must not release the partitions first.
        consumer.revocationTimeout = drainTimeout + .seconds(5)
        return (
            consumer,
            KafkaProducer.Configuration(bootstrapServers: bootstrap, properties: producerProperties)
        )
    }

    /// Consumer properties that librdkafka would warn about on a producer.
    public static let consumerOnly: Set<String> = [
        "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms", "auto.offset.reset",
        "partition.assignment.strategy", "queued.max.messages.kbytes", "fetch.max.bytes", "group.instance.id",
        "enable.auto.commit", "isolation.level", "fetch.wait.max.ms",
    ]
}
