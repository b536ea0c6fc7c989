import Foundation
import Kafka
import LedgerDomain
public import Observability

/// The ledger and the consumer group must agree on what was processed (docs/internals.md, "A ledger that
/// starts empty"). The worker records in the ledger the offsets it is about to commit, before it commits
/// them; at start-up it reads the group's committed offsets of every topic it reads and refuses to start
/// when the group has committed past what this ledger recorded. Such a ledger never saw jobs the group
/// processed: it was deleted and created again, started on a fresh volume, or restored from an old backup,
/// and its missing grants would let those purchases be granted again, to new orders.
public enum LedgerGroupCheck {
    /// The group's committed offsets of every partition of the topics, given with their partition counts, as
    /// the ledger names partitions.
    static func committed(consumer: KafkaConsumer, partitionCounts: [(topic: String, partitions: Int)]) async throws
        -> [ConsumedPartition: Int64]
    {
        let partitions = partitionCounts.flatMap { topic, count in
            (0..<Int32(clamping: count)).map { TopicPartition(topic: topic, partition: $0) }
        }
        guard !partitions.isEmpty else { return [:] }
        let committed = try await consumer.committed(partitions)
        return Dictionary(uniqueKeysWithValues: committed.map { (ConsumedPartition($0.key), $0.value) })
    }

    /// Throws ``LedgerMismatchError`` when `committed` is past what `ledger` recorded for `group`.
    static func check(ledger: any OffsetStore, group: String, committed: [ConsumedPartition: Int64]) async throws {
        let recorded = try await ledger.recordedOffsets(group: group)
        let behind = recorded.behind(committed)
        guard behind.isEmpty else { throw LedgerMismatchError(group: group, behind: behind) }
    }
}

extension LedgerGroupCheck {
    /// `receipt-worker ledger accept-offsets`: an operator's word that this ledger is new on purpose. Records
    /// the group's committed offsets of every topic the worker reads as the ledger's own, so the next start
    /// accepts them. Returns what was recorded.
    public static func acceptGroupOffsets(_ configuration: WorkerConfiguration, logger: Logger) async throws
        -> [(partition: String, offset: Int64)]
    {
        let kafka = try configuration.kafkaClients()
        let consumer = try KafkaConsumer(configuration: kafka.consumer, logger: logger)
        let counts = try await readTopics(configuration, logger: logger)
        let committed = try await Self.committed(consumer: consumer, partitionCounts: counts)
        await consumer.close()
        try await configuration.withToolLedger(newLedgerAllowed: true) {
            try await $0.recordOffsets(committed, group: configuration.groupID)
        }
        return committed.sorted { ($0.key.topic, $0.key.partition) < ($1.key.topic, $1.key.partition) }
            .map { ($0.key.description, $0.value) }
    }
}

extension LedgerGroupCheck {
    /// A partition the group is moved back on: from what it committed to what the ledger recorded, or to the
    /// partition's first offset kept when the topic no longer holds what the ledger recorded.
    public struct Rewind: Sendable, Equatable {
        public let partition: String
        public let committed: Int64
        /// Where the group is moved to.
        public let recorded: Int64
        /// Messages the ledger lacks that the topic no longer holds (past its retention): never decided again.
        public var lost: Int64 = 0

        /// The move of one partition: nil when the group committed nothing past `recorded` (the ledger's offset;
        /// nil when it recorded none, read as 0 as the worker's start-up check reads it) and lost nothing.
        static func of(partition: String, committed: Int64, recorded: Int64?, low: Int64) -> Rewind? {
            let target = max(recorded ?? 0, low)
            let lost = max(0, min(low, committed) - (recorded ?? 0))
            guard target < committed || lost > 0 else { return nil }
            // Never forward: with all it lacks gone, the group stays where it is.
            return Rewind(partition: partition, committed: committed, recorded: min(target, committed), lost: lost)
        }
    }

    /// `receipt-worker ledger rewind-group`: after a restore, moves the consumer group back to what the ledger
    /// recorded, on every partition where the group committed past it (a partition the ledger never recorded:
    /// to its first offset), so the workers decide again every job the restored ledger lacks. The jobs it
    /// holds are answered from it; a grant decided again repeats its event id (section 4 of the contract), so
    /// a grant service deduplicates it. The group must have no member: the broker refuses to commit for a
    /// group whose workers run (stop them first). Returns the partitions moved; none when they agree.
    ///
    /// When a topic no longer holds what the ledger lacks (the backup is older than the topic's retention), those
    /// jobs cannot be decided again and their purchases could be granted again to new orders: refused unless
    /// `acceptLoss` (then the group moves to the first offset kept, and the ledger records that offset as its own,
    /// so the workers start on it).
    public static func rewindGroup(
        _ configuration: WorkerConfiguration, logger: Logger, dryRun: Bool, acceptLoss: Bool = false
    ) async throws -> [Rewind] {
        let kafka = try configuration.kafkaClients()
        let consumer = try KafkaConsumer(configuration: kafka.consumer, logger: logger)
        do {
            let counts = try await readTopics(configuration, logger: logger)
            let committed = try await Self.committed(consumer: consumer, partitionCounts: counts)
            let recorded = try await configuration.withToolLedger {
                try await $0.recordedOffsets(group: configuration.groupID)
            }
            var moves: [TopicPartition: Int64] = [:]
            var rewinds: [Rewind] = []
            // The partitions whose lost messages are accepted with --accept-loss: the ledger's offset moves with the
            // group's, or the workers' start-up check would refuse the ledger as behind the group.
            var accepted: [ConsumedPartition: Int64] = [:]
            for (partition, offset) in committed {
                let topicPartition = TopicPartition(topic: partition.topic, partition: partition.partition)
                guard recorded.offsets[partition] ?? .min < offset else { continue }
                let low = try await consumer.watermarks(topicPartition).low
                guard
                    let rewind = Rewind.of(
                        partition: partition.description, committed: offset, recorded: recorded.offsets[partition],
                        low: low)
                else { continue }
                if rewind.recorded < offset { moves[topicPartition] = rewind.recorded }
                if rewind.lost > 0 { accepted[partition] = rewind.recorded }
                rewinds.append(rewind)
            }
            let lost = rewinds.filter { $0.lost > 0 }
            if !dryRun, !acceptLoss, !lost.isEmpty {
                throw RewindRefused(
                    description: "the topics no longer hold \(lost.reduce(0) { $0 + $1.lost }) message(s) the ledger"
                        + " lacks (" + lost.map { "\($0.partition): \($0.lost)" }.joined(separator: ", ")
                        + "; past their retention): they cannot be decided again, and their purchases could be"
                        + " granted again to new orders. Restore a newer backup; or, accepting that, run again with"
                        + " --accept-loss. Nothing was moved")
            }
            if !dryRun && !accepted.isEmpty {
                try await configuration.withToolLedger {
                    try await $0.recordOffsets(accepted, group: configuration.groupID)
                }
            }
            if !dryRun && !moves.isEmpty {
                do {
                    try await consumer.commit(moves)
                } catch {
                    throw RewindRefused(
                        description: "committing for group \(configuration.groupID) failed (\(error)): stop every"
                            + " worker of the group first (the broker commits only for a group without members),"
                            + " then run ledger rewind-group again")
                }
            }
            await consumer.close()
            return rewinds.sorted { $0.partition < $1.partition }
        } catch {
            await consumer.close()
            throw error
        }
    }

    /// The topics the workers read, with their partition counts (a topic that does not exist is skipped).
    static func readTopics(_ configuration: WorkerConfiguration, logger: Logger) async throws
        -> [(topic: String, partitions: Int)]
    {
        let topics = configuration.topics
        let properties = WorkerAssembly.adminProperties(configuration)
        var counts: [(topic: String, partitions: Int)] = []
        for topic in [topics.jobs, topics.retries, topics.notifications, topics.consumption] {
            do {
                counts.append(
                    (topic, try await KafkaAdmin.partitionCount(of: topic, properties: properties, logger: logger)))
            } catch let error as KafkaError where error.isMissingTopic {
                continue  // a topic the workers do not read either
            }
        }
        return counts
    }
}

extension ConsumedPartition {
    init(_ partition: TopicPartition) { self.init(topic: partition.topic, partition: partition.partition) }
}

/// `ledger rewind-group` could not move the group.
public struct RewindRefused: Error, CustomStringConvertible {
    public let description: String
}

/// The ledger does not hold what the consumer group has processed: the worker does not start (exit 2).
public struct LedgerMismatchError: Error, CustomStringConvertible {
    let group: String
    let behind: [(ConsumedPartition, committed: Int64, recorded: Int64?)]

    public var description: String {
        let shown = behind.prefix(5).map { partition, committed, recorded in
            "\(partition) committed to \(committed), the ledger recorded "
                + (recorded.map { "\($0)" } ?? "nothing (it was empty when it began recording)")
        }
        let more = behind.count > 5 ? " (and \(behind.count - 5) more)" : ""
        return "the ledger does not hold what consumer group \(group) has processed: "
            + shown.joined(separator: "; ") + more
            + ". It was replaced, started empty or restored from an older copy: the grants of those jobs are not"
            + " in it, and their purchases could be granted again to new orders. Start on the ledger the group"
            + " used (ledger.url), or, if this ledger is new on purpose and the old one is lost, run"
            + " `receipt-worker ledger accept-offsets --config FILE` once (docs/deployment.md, \"A ledger that starts empty\")."
            + " Restored it from a backup on purpose: stop every worker, run `receipt-worker ledger rewind-group"
            + " --config FILE`, and start them: they decide again what the backup lacks (docs/runbook.md, \"Backup and restore\")"
    }
}
