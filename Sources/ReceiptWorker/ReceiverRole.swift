import Foundation
import Kafka
import Observability
import Runtime
import Synchronization

/// `receipt-worker receive`: the notification receiver alone, for a Deployment of its own. It needs only the
/// broker: no consumer group, no ledger. Apple's deliveries are answered whenever the notifications topic takes
/// records, whatever happens to PostgreSQL or to the workers' partitions (a worker's readiness needs both).
public final class ReceiverRole: Sendable {
    public let metrics: WorkerMetrics
    let producer: KafkaProducer
    let intake: NotificationIntake
    let configuration: WorkerConfiguration
    let logger: Logger
    /// When the notifications topic last answered a metadata request (nil: not yet).
    private let brokerSeen = Mutex<ContinuousClock.Instant?>(nil)
    private let stopping = Atomic<Bool>(false)

    public init(configuration: WorkerConfiguration, logger: Logger, metrics: WorkerMetrics = WorkerMetrics()) throws {
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
        let apps = try WorkerAssembly.appleApps(configuration, logger: logger)
        do {
            producer = try KafkaProducer(
                configuration: try WorkerAssembly.kafkaConfigurations(configuration).producer, logger: logger)
        } catch {
            throw WorkerAssembly.configurationError(error)
        }
        intake = NotificationIntake(
            apps: apps, producer: producer, topic: configuration.topics.notifications, metrics: metrics,
            logger: logger)
    }

    /// Why the receiver is not ready (empty when it is): the broker has not described the notifications topic
    /// in the last 15 s. Readiness routes Apple's deliveries; the ledger is not the receiver's concern.
    public var readiness: [String] {
        if stopping.load(ordering: .relaxed) { return ["stopping"] }
        guard let seen = brokerSeen.withLock({ $0 }) else { return ["starting: waiting for the broker"] }
        let age = ContinuousClock.now - seen
        return age < .seconds(15) ? [] : ["broker: the notifications topic not described for \(Int(age.inSeconds)) s"]
    }

    public func receiver(listen: ListenAddress) throws -> NotificationReceiver {
        let intake = self.intake
        return try NotificationReceiver(listen: listen, intake: { intake })
    }

    /// Describes the notifications topic every 5 s (for readiness) until ``shutdown()``; a missing topic stops
    /// start-up as a configuration error, as the worker's does.
    public func run() async throws {
        let topic = configuration.topics.notifications
        let properties = WorkerAssembly.adminProperties(configuration)
        while !stopping.load(ordering: .relaxed) {
            do {
                let logger = self.logger
                try await withDeadline(.seconds(5), timeout: BrokerSilent()) {
                    _ = try await KafkaAdmin.partitionCount(of: topic, properties: properties, logger: logger)
                }
                brokerSeen.withLock { $0 = ContinuousClock.now }
            } catch let error as KafkaError where error.isMissingTopic {
                throw ConfigurationError(
                    .unusable, key: "topics.notifications",
                    reason: "topic \(topic) cannot be used; create it first (deploy/README.md, Topics)")
            } catch {
                logger.warning("cannot describe the notifications topic", ["error": "\(error)"])
            }
            try? await Task.sleep(for: .seconds(5))
        }
        await producer.close(timeout: .seconds(10))
    }

    struct BrokerSilent: Error, CustomStringConvertible {
        var description: String { "the broker did not describe the topic within 5 s" }
    }

    /// Turns unready and ends ``run()`` (which flushes the producer).
    public func shutdown() { stopping.store(true, ordering: .relaxed) }
}
