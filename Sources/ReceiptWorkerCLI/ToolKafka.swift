import Foundation
import Kafka
import Observability
import ReceiptWorker

/// Kafka clients for the command-line tools, from the same `kafka.*` keys as the worker.
enum ToolKafka {
    /// Tools print their own output; librdkafka's chatter below warnings would bury it.
    static let logger = Logger(label: "receipt-worker", minimumLevel: max(.warning, Logger.defaultLevel))

    /// How long a command's message waits for the broker, at most (as the ledger: ``WorkerConfiguration/toolLedgerPatience``).
    static let toolPatienceMilliseconds = Int(WorkerConfiguration.toolLedgerPatience.components.seconds * 1000)

    static func producer(_ configuration: WorkerConfiguration) throws -> KafkaProducer {
        try WorkerAssembly.producerForPeople(
            configuration, patienceMilliseconds: toolPatienceMilliseconds, logger: logger)
    }

    /// A consumer that reads by assignment, outside any group (see ``KafkaConsumer/assign(topic:from:timeout:)``):
    /// a tool never takes partitions from the workers, moves anyone's offsets, or waits for a group join.
    static func reader(_ configuration: WorkerConfiguration) throws -> KafkaConsumer {
        var properties = configuration.kafka
        let bootstrap = properties.removeValue(forKey: "bootstrap.servers") ?? "127.0.0.1:9092"
        properties.removeValue(forKey: "group.id")
        properties["fetch.wait.max.ms"] = properties["fetch.wait.max.ms"] ?? "100"
        return try KafkaConsumer(
            configuration: KafkaConsumer.Configuration(
                bootstrapServers: bootstrap, groupID: "receipt-worker-tool-\(UUID().uuidString.lowercased())",
                properties: properties),
            logger: logger)
    }
}
