/// What the ledger knows of the consumer group's progress, so that a ledger that does not hold what the group
/// has already processed is refused at start-up instead of believed (docs/internals.md, "A ledger that starts
/// empty"). The worker records the offsets it is about to commit, before it commits them; at start-up it compares
/// the group's committed offsets with what the ledger recorded. A group that committed past what the ledger
/// recorded processed jobs this ledger never saw: the ledger was replaced, restored from an old backup, or
/// started empty on a fresh volume, and its grants are missing, so purchases could be granted again.
/// (A ledger upgraded from a release that recorded no offsets, holding decisions already, is trusted:
/// ``RecordedOffsets/startedEmpty``.)
public protocol OffsetStore: Sendable {
    /// Records the offsets about to be committed for `group` (each partition keeps its highest).
    func recordOffsets(_ offsets: [ConsumedPartition: Int64], group: String) async throws

    /// What the ledger recorded for `group`, and whether it was empty when it began recording.
    func recordedOffsets(group: String) async throws -> RecordedOffsets
}

/// A topic's partition, as the ledger records it (the Ledger module knows nothing of Kafka).
public struct ConsumedPartition: Hashable, Sendable, CustomStringConvertible {
    public let topic: String
    public let partition: Int32
    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }
    public var description: String { "\(topic)[\(partition)]" }
}

public struct RecordedOffsets: Sendable {
    /// The next offset to read, per partition, as last recorded.
    public var offsets: [ConsumedPartition: Int64]
    /// The ledger held no decision when it began recording offsets: a new ledger (or an empty one upgraded).
    /// Every commit of its group since was recorded in it first, so a group that committed past what it
    /// recorded, or to a partition it never recorded, processed jobs without it. A ledger that already held
    /// decisions when it was upgraded cannot tell: replicas of the previous release, which record nothing,
    /// commit beside the new ones during a rolling update. It is the ledger that held them, and is trusted.
    public var startedEmpty: Bool

    public init(offsets: [ConsumedPartition: Int64], startedEmpty: Bool) {
        self.offsets = offsets
        self.startedEmpty = startedEmpty
    }

    /// The partitions whose committed offset (from the group) is past what this ledger recorded: each with
    /// both offsets (nil: never recorded). Empty when the ledger matches the group, or cannot tell.
    public func behind(_ committed: [ConsumedPartition: Int64]) -> [(
        ConsumedPartition, committed: Int64, recorded: Int64?
    )] {
        guard startedEmpty else { return [] }
        return committed.compactMap { partition, offset in
            let recorded = offsets[partition]
            return offset > (recorded ?? 0) ? (partition, offset, recorded) : nil
        }.sorted { ($0.0.topic, $0.0.partition) < ($1.0.topic, $1.0.partition) }
    }
}
