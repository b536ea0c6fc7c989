public import Flows
import Foundation
import Kafka
public import Lifecycle
public import Observability
import Runtime
import Synchronization

/// `receipt-worker receive`: the notification receiver alone, for a Deployment of its own. It needs only the
/// broker: no consumer group, no ledger. Apple's deliveries are answered whenever the notifications topic takes
/// records, whatever happens to PostgreSQL or to the workers' partitions (a worker's readiness needs both).
public final class ReceiverRole: Service {
    public let metrics: WorkerMetrics
    let producer: KafkaProducer
    let intake: NotificationIntake
    let configuration: WorkerConfiguration
    let logger: Logger
    /// When the notifications topic was last described, and what the broker said of it (nil: not yet).
    private let brokerSeen = Mutex<(at: ContinuousClock.Instant, health: TopicHealth)?>(nil)
    /// Triggered by ``shutdown()``, as by the graceful shutdown of the group running the role.
    private let stop = GracefulShutdown()
    /// Triggered when the group's shutdown begins (``beginStopping()``), before the receiver's port closes.
    private let stopping = GracefulShutdown()
    /// Whether the last records reached the broker.
    let deliveries = DeliveryHealth()
    /// How often the notifications topic is described.
    let healthInterval: Duration

    public init(
        configuration: WorkerConfiguration, logger: Logger, metrics: WorkerMetrics = .ofProcess(),
        healthInterval: Duration = .seconds(5)
    ) throws {
        self.configuration = configuration
        self.healthInterval = healthInterval
        self.logger = logger
        self.metrics = metrics
        let apps = try WorkerAssembly.appleApps(
            configuration, logger: logger,
            revocationObserver: { outcome, detail in
                metrics.revocationCheck(outcome).increment()
                if let detail {
                    logger.warning("a certificate chain's revocation check", ["outcome": outcome, "why": detail])
                }
            })
        do {
            producer = try KafkaProducer(
                configuration: try configuration.kafkaClients().producer, logger: logger)
        } catch {
            throw WorkerAssembly.configurationError(error)
        }
        intake = NotificationIntake(
            apps: apps, producer: producer, topic: configuration.topics.notifications, metrics: metrics,
            logger: logger, deliveries: deliveries)
        // `receipt_worker_ready`, which the alerts on receivers read, follows /readyz as a worker's does.
        metrics.readiness.withLock { $0 = { [weak self] in self?.readiness.isEmpty == true } }
    }

    /// Why the receiver is not ready (empty when it is): readiness means a record could be written now. Not
    /// ready while the broker has not described the notifications topic for three rounds, while a partition of
    /// it has no leader or the broker says this client may not write to it, and for a while after a record
    /// the broker refused. Readiness routes Apple's deliveries; the ledger is not the receiver's concern.
    public var readiness: [String] {
        if stop.isTriggered || stopping.isTriggered { return ["stopping"] }
        guard let seen = brokerSeen.withLock({ $0 }) else { return ["starting: waiting for the broker"] }
        var problems: [String] = []
        let age = ContinuousClock.now - seen.at
        if age >= max(.seconds(15), healthInterval * 3) {
            problems.append("broker: the notifications topic not described for \(Int(age.inSeconds)) s")
        }
        problems += seen.health.problems(topic: configuration.topics.notifications)
        if let delivery = deliveries.problem { problems.append(delivery) }
        return problems
    }

    /// A fabricated fatal error of the producer (librdkafka's test hook), for tests of what follows one.
    package func raiseProducerFatalErrorForTesting() {
        producer.raiseFatalErrorForTesting("a test's fatal producer error")
    }

    public func receiver(listen: ListenAddress) throws -> NotificationReceiver {
        let intake = self.intake
        return try NotificationReceiver(listen: listen, intake: { intake })
    }

    /// Describes the notifications topic every `healthInterval` (for readiness) until its graceful shutdown or
    /// ``shutdown()``, then flushes the producer; a missing topic stops start-up as a configuration error, as the
    /// worker's does.
    public func run() async throws {
        let topic = configuration.topics.notifications
        let properties = WorkerAssembly.adminProperties(configuration)
        let outer = GracefulShutdown.current
        while !stop.isTriggered && !outer.isTriggered && !Task.isCancelled {
            do {
                let logger = self.logger
                try await withDeadline(.seconds(5), timeout: BrokerSilent()) { [self] in
                    let health = try await KafkaAdmin.topicHealth(
                        of: topic, properties: properties, timeout: .seconds(4), logger: logger)
                    brokerSeen.withLock { $0 = (ContinuousClock.now, health) }
                }
            } catch let error as KafkaError where error.isMissingTopic {
                throw ConfigurationError(
                    .unusable, key: "topics.notifications",
                    reason: "topic \(topic) cannot be used; create it first (deploy/README.md, Topics)")
            } catch {
                logger.warning("cannot describe the notifications topic", ["error": "\(error)"])
            }
            if let fatal = producer.fatalError {
                // Every delivery would be refused from now on: the process exits and is restarted with a new
                // producer, rather than staying unready for ever.
                logger.critical("the Kafka producer failed for good; the receiver stops", ["error": "\(fatal)"])
                await producer.close(timeout: .seconds(1))
                throw fatal
            }
            await withGracefulShutdown(of: [outer], stop: { self.stop.trigger() }) {
                await stop.sleep(for: healthInterval)
            }
        }
        await producer.close(timeout: .seconds(10))
    }

    struct BrokerSilent: Error, CustomStringConvertible {
        var description: String { "the broker did not describe the topic within 5 s" }
    }

    /// Turns unready; ``run()`` goes on (the receiver, still answering, needs the producer).
    public func beginStopping() { stopping.trigger() }

    /// Turns unready and ends ``run()`` (which flushes the producer).
    public func shutdown() { stop.trigger() }
}
