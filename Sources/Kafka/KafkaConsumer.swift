public import Foundation
public import Observability
import Synchronization
import Vocabulary

/// A Kafka consumer-group member with manual commits.
///
/// Offsets are never committed automatically: the caller commits explicit offsets once their work is
/// done. Messages and rebalances arrive through ``events`` in order; a revocation waits for the caller.
/// A dedicated thread polls librdkafka; at most `bufferedBatches × batchSize` messages wait in memory.
public final class KafkaConsumer: Sendable {
    public struct Configuration: Sendable {
        /// `bootstrap.servers`.
        public var bootstrapServers: String
        /// `group.id`.
        public var groupID: String
        /// Where a partition without a committed offset starts (`auto.offset.reset`). Default: earliest.
        public var autoOffsetReset = "earliest"
        /// How long a revocation waits for ``KafkaRevocation/done()``. Default: 30 s.
        public var revocationTimeout: Duration = .seconds(30)
        /// Messages handed to the reader at once. Default: 500.
        public var batchSize = 500
        /// Batches that may wait for the reader before polling stops. Default: 4.
        public var bufferedBatches = 4
        /// Any librdkafka property, passed through; it wins over the fields above. Auto-commit cannot be
        /// turned on: a job's offset is committed only after its result is acknowledged.
        public var properties: [String: String] = [:]

        public init(bootstrapServers: String, groupID: String, properties: [String: String] = [:]) {
            self.bootstrapServers = bootstrapServers
            self.groupID = groupID
            self.properties = properties
        }

        /// Checks the configuration as the client's creation would, without creating a client (nothing
        /// connects): guarded properties, unknown librdkafka properties, invalid values.
        public func validate() throws(KafkaError) {
            try librdkafkaProperties().validate()
        }

        /// The properties librdkafka is given, in order (the guarded ones checked): for `check-config --print`.
        public func effectiveProperties() throws(KafkaError) -> [(key: String, value: String)] {
            try librdkafkaProperties().entries
        }

        func librdkafkaProperties() throws(KafkaError) -> KafkaProperties {
            if properties["enable.auto.commit"].map({ $0 != "false" }) == true {
                throw .invalidConfiguration(
                    key: "enable.auto.commit", reason: "must be false: offsets are committed after results")
            }
            return KafkaProperties(
                [
                    ("bootstrap.servers", bootstrapServers), ("group.id", groupID),
                    ("auto.offset.reset", autoOffsetReset), ("enable.auto.commit", "false"),
                    ("enable.auto.offset.store", "false"), ("enable.partition.eof", "false"),
                ], overrides: properties)
        }
    }

    private let client: RDKafkaClient

    /// A fabricated fatal error (librdkafka's test hook), for tests of what follows one: ``events`` reports
    /// it as ``KafkaConsumerEvent/fatalError(_:)``.
    package func raiseFatalErrorForTesting(_ reason: String) { client.raiseFatalErrorForTesting(reason) }
    private let configuration: Configuration
    private let logger: Logger
    private let channel: EventChannel<KafkaConsumerEvent>
    private let gate = IntakeGate()
    private let poller = Mutex<PollThread?>(nil)
    private let closed = Atomic<Bool>(false)

    public init(configuration: Configuration, logger: Logger) throws {
        guard configuration.batchSize > 0, configuration.bufferedBatches > 0 else {
            throw KafkaError(code: .invalidConfiguration, reason: "batchSize and bufferedBatches must be positive")
        }
        // Everything (rebalances, errors) is served by the consumer poll on the poll thread.
        self.client = try RDKafkaClient.consumer(properties: configuration.librdkafkaProperties(), logger: logger)
        self.configuration = configuration
        self.logger = logger
        self.channel = EventChannel(capacity: configuration.bufferedBatches)
    }

    deinit {
        channel.finish()
        poller.withLock { $0?.stop() }
    }

    /// Messages and rebalances, in order. Ends when the consumer is closed.
    public var events: KafkaConsumerEvents { KafkaConsumerEvents(channel: channel) }

    /// Ends ``events``: the reader gets nil at once, events not yet read are dropped (their offsets were not
    /// committed). The consumer stays usable for commits until ``close()``. For graceful shutdown.
    public func endEvents() {
        channel.finish()
    }

    /// Joins the group for `topics` and starts polling.
    public func subscribe(topics: [String]) throws {
        guard !closed.load(ordering: .acquiring) else { throw KafkaError.closed }
        try client.subscribe(topics: topics)
        try startPolling()
    }

    /// Throws when the consumer was closed meanwhile (after the caller's own check): the flag is set under the
    /// same lock, so either ``close()`` finds the poll thread started here and stops it, or none starts.
    private func startPolling() throws(KafkaError) {
        try poller.withLock { poller throws(KafkaError) in
            guard !closed.load(ordering: .acquiring) else { throw KafkaError.closed }
            guard poller == nil else { return }
            let loop = ConsumerPollLoop(
                client: client, channel: channel, gate: gate, configuration: configuration, logger: logger)
            client.context.rebalance = { rk, err, partitions in loop.rebalance(rk, err, partitions) }
            poller = PollThread(name: "kafka-consume") { loop.run($0) }
        }
    }

    /// Commits, synchronously with the broker, the next offset to read for each partition
    /// (the last finished offset + 1).
    public func commit(_ offsets: [TopicPartition: Int64]) async throws {
        guard !offsets.isEmpty else { return }
        guard !closed.load(ordering: .acquiring) else { throw KafkaError.closed }
        let client = self.client
        if let failed = await Blocking.run({ client.commitBlocking(offsets) }) { throw failed }
    }

    /// The committed offsets (next offset to read) of these partitions; absent where none is committed.
    public func committed(_ partitions: [TopicPartition], timeout: Duration = .seconds(10)) async throws
        -> [TopicPartition: Int64]
    {
        let client = self.client
        return try await Blocking.run { client.committedBlocking(partitions, timeout: timeout) }.get()
    }

    /// Where ``assign(topic:from:timeout:)`` starts reading: the oldest record kept, the end, or the first
    /// record written at or after a time (found by the broker's time index).
    public enum StartOffset: Sendable { case beginning, end, time(Date) }

    /// Reads every partition of `topic` outside any consumer group (no join, no rebalance, nothing that
    /// could take partitions from a group's members) and starts polling. Returns each partition with the
    /// offset reading starts at (for `.time`; nil for the symbolic beginning and end); throws when the topic
    /// does not exist. For tools; commits are meaningless here.
    @discardableResult
    public func assign(topic: String, from start: StartOffset, timeout: Duration = .seconds(10)) async throws
        -> [(partition: TopicPartition, start: Int64?)]
    {
        try await assign(topics: [topic], from: start, timeout: timeout)
    }

    /// ``assign(topic:from:timeout:)`` for several topics at once (one assignment holds them all).
    @discardableResult
    public func assign(topics: [String], from start: StartOffset, timeout: Duration = .seconds(10)) async throws
        -> [(partition: TopicPartition, start: Int64?)]
    {
        guard !closed.load(ordering: .acquiring) else { throw KafkaError.closed }
        let client = self.client
        var partitions: [TopicPartition] = []
        for topic in topics {
            let count = try await Blocking.run { client.partitionCount(topic: topic, timeout: timeout) }.get()
            guard count > 0 else { throw KafkaError.unknownTopic }
            partitions += (0..<count).map { TopicPartition(topic: topic, partition: $0) }
        }
        var offsets: [TopicPartition: Int64]
        var resolved: [TopicPartition: Int64] = [:]
        switch start {
        case .beginning:
            offsets = Dictionary(uniqueKeysWithValues: partitions.map { ($0, RDKafkaClient.offsetBeginning) })
        case .end: offsets = Dictionary(uniqueKeysWithValues: partitions.map { ($0, RDKafkaClient.offsetEnd) })
        case .time(let date):
            // A date from a command line: clamped, never a trapping conversion.
            let millis = max(0, EpochMilliseconds.of(date, rounding: .down))
            let times = Dictionary(uniqueKeysWithValues: partitions.map { ($0, millis) })
            // -1 where nothing was written since: read from the end.
            offsets = try await Blocking.run { client.offsetsForTimesBlocking(times, timeout: timeout) }.get()
            resolved = offsets
        }
        try client.assign(offsets, order: partitions)
        try startPolling()
        return partitions.map { ($0, resolved[$0]) }
    }

    /// The first offset held and the offset the next record will get (the high watermark), asked of the
    /// broker. Tools use it to read a topic up to where it ended when they started.
    public func watermarks(_ partition: TopicPartition, timeout: Duration = .seconds(10)) async throws
        -> (low: Int64, high: Int64)
    {
        let client = self.client
        return try await Blocking.run { client.watermarksBlocking(partition, timeout: timeout) }.get()
    }

    /// Stops fetching every assigned partition, and every partition assigned later, until
    /// ``resumeIntake()``. Returns false when the intake was already paused. Safe from any thread; the
    /// pause follows the consumer's real assignment through rebalances (see `IntakeGate`).
    @discardableResult
    public func pauseIntake() throws -> Bool { try gate.set(.init(all: true), client: client) }

    /// Fetches every assigned partition again, and every partition assigned later. Returns false when the
    /// intake was not paused.
    @discardableResult
    public func resumeIntake() throws -> Bool { try gate.set(.init(), client: client) }

    /// Pauses the partitions of `topics`, and `partitions` one by one (now and after rebalances), fetching
    /// every other; both empty resumes everything. Returns false when the intake was already so.
    @discardableResult
    public func pauseIntake(topics: Set<String>, partitions: Set<TopicPartition> = []) throws -> Bool {
        try gate.set(.init(topics: topics, partitions: partitions), client: client)
    }

    /// True while any partition is paused by ``pauseIntake()`` or ``pauseIntake(topics:partitions:)``.
    public var isIntakePaused: Bool {
        let pause = gate.pause
        return pause.all || !pause.topics.isEmpty || !pause.partitions.isEmpty
    }

    /// The topics whose partitions are all paused now (every subscribed topic after ``pauseIntake()``: nil).
    public var pausedTopics: Set<String>? { gate.pause.all ? nil : gate.pause.topics }

    /// The partitions paused one by one (beside whole topics).
    public var pausedPartitions: Set<TopicPartition> { gate.pause.partitions }

    /// The partitions assigned to this member now.
    public func assignment() throws -> [TopicPartition] { try client.assignment() }

    /// Leaves the group and stops polling. Commit finished work before: nothing is committed here, and
    /// events not yet read are dropped (their offsets were not committed, so they will be read again).
    public func close() async {
        // Under the poll thread's lock, so a subscribe or assign racing this either started its thread before
        // (stopped below) or sees the flag and starts none.
        let (first, running) = poller.withLock { poller in
            (!closed.exchange(true, ordering: .acquiringAndReleasing), poller)
        }
        guard first else { return }
        channel.finish()
        if let poller = running {
            await poller.stopAndJoin()  // the poll thread leaves the group on its way out
        } else {
            let client = self.client
            await Blocking.run { client.closeConsumerBlocking() }
        }
    }
}
