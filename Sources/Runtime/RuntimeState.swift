import Kafka

/// What the runtime knows besides its partitions (``PartitionBook``) and its slots (``GroupScheduler``), in one
/// value behind one lock: the topics it reads and their partition counts, each partition's lag, and whether
/// commits and parks fail now. Its methods change it and say what to do (log a failure or stay quiet), so its
/// rules are tested without a broker.
struct RuntimeState: Sendable {
    /// The topics read (set when the runtime starts): a route parks only on a topic that is read.
    private(set) var subscribed: Set<String> = []
    /// The partition counts of the topics read, as the caller found them at start-up (the park topic's lanes).
    private(set) var partitionCounts: [String: Int] = [:]
    /// Per assigned partition, its lag (high watermark minus committed offset) as last measured.
    private(set) var lags: [TopicPartition: Int64] = [:]
    /// When a failed commit was last said (nil: the last commit succeeded).
    private var commitFailureSaid: ContinuousClock.Instant?
    /// When a failed park was last said.
    private var parkFailureSaid: ContinuousClock.Instant?

    /// How often a failure that lasts is said again.
    static let failureRepeat: Duration = .seconds(30)

    mutating func start(reading topics: Set<String>, partitionCounts: [String: Int]) {
        subscribed = topics
        self.partitionCounts = partitionCounts
    }

    /// False while commits fail (since the first failure, until one succeeds).
    var commitsSucceed: Bool { commitFailureSaid == nil }

    mutating func commitSucceeded() { commitFailureSaid = nil }

    /// A commit failed (they are retried every 200 ms): whether to say so, once and then every 30 s.
    mutating func commitFailed(at now: ContinuousClock.Instant) -> Bool { Self.say(&commitFailureSaid, at: now) }

    /// A park failed: whether to say so, once and then every 30 s.
    mutating func parkFailed(at now: ContinuousClock.Instant) -> Bool { Self.say(&parkFailureSaid, at: now) }

    /// Lags just measured; partitions no longer assigned forget theirs (one whose watermarks could not be read
    /// keeps its last).
    mutating func measured(_ measured: [TopicPartition: Int64], assigned: Set<TopicPartition>) {
        lags.merge(measured) { _, new in new }
        lags = lags.filter { assigned.contains($0.key) }
    }

    mutating func released(_ partitions: [TopicPartition]) {
        for partition in partitions { lags[partition] = nil }
    }

    private static func say(_ last: inout ContinuousClock.Instant?, at now: ContinuousClock.Instant) -> Bool {
        if let said = last, now - said < failureRepeat { return false }
        last = now
        return true
    }
}
