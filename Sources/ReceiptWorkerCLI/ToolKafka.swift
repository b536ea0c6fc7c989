import Foundation
import Kafka
import Observability
import ReceiptWorker

/// Kafka clients for the command-line tools, from the same `kafka.*` keys as the worker.
enum ToolKafka {
    /// Tools print their own output; librdkafka's chatter below warnings would bury it.
    static let logger = Logger(label: "receipt-worker", minimumLevel: max(.warning, Logger.defaultLevel))

    static func producer(_ configuration: WorkerConfiguration) throws -> KafkaProducer {
        var properties = configuration.kafka
        let bootstrap = properties.removeValue(forKey: "bootstrap.servers") ?? "127.0.0.1:9092"
        properties.removeValue(forKey: "group.id")
        for key in WorkerAssembly.consumerOnly { properties.removeValue(forKey: key) }
        return try KafkaProducer(
            configuration: KafkaProducer.Configuration(bootstrapServers: bootstrap, properties: properties), logger: logger)
    }

    /// A consumer in a group of its own (never committed), so a tool reading a topic never takes
    /// partitions from the workers or moves anyone's offsets.
    static func reader(_ configuration: WorkerConfiguration, tool: String, fromBeginning: Bool) throws -> KafkaConsumer {
        var properties = configuration.kafka
        let bootstrap = properties.removeValue(forKey: "bootstrap.servers") ?? "127.0.0.1:9092"
        properties.removeValue(forKey: "group.id")
        properties["fetch.wait.max.ms"] = properties["fetch.wait.max.ms"] ?? "100"
        var consumer = KafkaConsumer.Configuration(
            bootstrapServers: bootstrap, groupID: "receipt-worker-\(tool)-\(UUID().uuidString.lowercased())", properties: properties)
        consumer.autoOffsetReset = fromBeginning ? "earliest" : "latest"
        return try KafkaConsumer(configuration: consumer, logger: logger)
    }
}
