import Foundation
import Kafka
import Observability
import Synchronization
import TestSupport
import Testing

/// The broker the test command started (scripts/with-services.sh sets KAFKA_BOOTSTRAP).
enum TestBroker {
    static var bootstrap: String {
        guard let value = ProcessInfo.processInfo.environment["KAFKA_BOOTSTRAP"] else {
            Issue.record("KAFKA_BOOTSTRAP is not set: run the tests with scripts/test.sh, which starts a broker")
            return "127.0.0.1:1"
        }
        return value
    }

    static let logger = Logger(label: "kafka-test", minimumLevel: .warning)

    /// A new topic with a unique name, so tests never see each other's records.
    static func makeTopic(partitions: Int) async throws -> String {
        let name = "test-\(UUID().uuidString.prefix(8).lowercased())"
        try await KafkaAdmin.createTopics(bootstrapServers: bootstrap, topics: [(name, partitions)], logger: logger)
        return name
    }

    static func producer() throws -> KafkaProducer {
        var configuration = KafkaProducer.Configuration(bootstrapServers: bootstrap)
        configuration.deliveryTimeout = .seconds(20)
        configuration.linger = .milliseconds(1)
        return try KafkaProducer(configuration: configuration, logger: logger)
    }

    /// A consumer with short group timeouts: Tansu makes a first join wait for `max.poll.interval.ms`.
    static func consumer(group: String, strategy: String = "range,roundrobin") throws -> KafkaConsumer {
        var configuration = KafkaConsumer.Configuration(
            bootstrapServers: bootstrap, groupID: group,
            properties: [
                "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "max.poll.interval.ms": "10000",
                "partition.assignment.strategy": strategy, "topic.metadata.refresh.interval.ms": "1000",
            ])
        configuration.revocationTimeout = .seconds(20)
        return try KafkaConsumer(configuration: configuration, logger: logger)
    }

    /// A consumer reading `topic` from its beginning, without a group, committing nothing. Started beside a
    /// paused consumer before records come, it shows when a consumer fetching them has them: how a test shows
    /// the paused one got nothing without watching it for a while.
    static func witness(_ topic: String) async throws -> EventRecorder {
        let consumer = try Self.consumer(group: "witness-\(UUID())")
        _ = try await consumer.assign(topic: topic, from: .beginning)
        return EventRecorder(consumer, commits: false)
    }

    static func send(_ producer: KafkaProducer, topic: String, count: Int, prefix: String) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask {
                    let message = OutboundMessage(
                        topic: topic, key: Array("\(prefix)-\(index)".utf8), value: Array("\(prefix)-\(index)".utf8))
                    _ = try await producer.send(message)
                }
            }
            try await group.waitForAll()
        }
    }
}

/// Reads a consumer's events in the background and keeps them for assertions. Commits each message's
/// offset as it arrives when `commits` is set, and answers revocations after `holdRevocation`.
final class EventRecorder: Sendable {
    struct State {
        var messages: [InboundMessage] = []
        var assigned: Set<TopicPartition> = []
        var revocations: [[TopicPartition]] = []
        /// When each revocation reached the member (a test's poll of ``revocations`` may notice it later).
        var revokedAt: [ContinuousClock.Instant] = []
        var commitErrors: [String] = []
    }

    let consumer: KafkaConsumer
    let state = Mutex(State())
    private let task = Mutex<Task<Void, Never>?>(nil)
    let holdRevocation: Duration

    init(_ consumer: KafkaConsumer, commits: Bool = true, holdRevocation: Duration = .zero) {
        self.consumer = consumer
        self.holdRevocation = holdRevocation
        let started = Task { [self] in
            for await event in self.consumer.events {
                switch event {
                case .message(let message):
                    self.state.withLock { $0.messages.append(message) }
                    if commits {
                        do {
                            try await self.consumer.commit([message.topicPartition: message.offset + 1])
                        } catch {
                            self.state.withLock { $0.commitErrors.append("\(error)") }
                        }
                    }
                case .partitionsAssigned(let partitions):
                    self.state.withLock { $0.assigned.formUnion(partitions) }
                case .partitionsRevoked(let revocation):
                    self.state.withLock {
                        $0.revocations.append(revocation.partitions)
                        $0.revokedAt.append(.now)
                    }
                    try? await Task.sleep(for: holdRevocation)
                    self.state.withLock { $0.assigned.subtract(revocation.partitions) }
                    revocation.done()
                case .positions:
                    break
                case .fatalError(let error):
                    self.state.withLock { $0.commitErrors.append("fatal: \(error)") }
                }
            }
        }
        task.withLock { $0 = started }
    }

    var messages: [InboundMessage] { state.withLock { $0.messages } }
    var assigned: Set<TopicPartition> { state.withLock { $0.assigned } }
    var values: Set<String> { Set(messages.map { String(decoding: $0.value, as: UTF8.self) }) }

    func stop() async {
        await consumer.close()
        let running = task.withLock { $0 }
        await running?.value
    }
}
