import Kafka
import Synchronization

/// The worker's shared bookkeeping: jobs in flight per partition and what may be committed.
/// State changes happen under one lock; callers act (commit, pause, resume) outside it.
final class WorkerState: Sendable {
    private struct State {
        var partitions: [KafkaTopicPartition: PartitionOffsets] = [:]
        var committed: [KafkaTopicPartition: Int64] = [:]
        var inFlight = 0
        /// Partitions being revoked: assigned until their drain ends, but no new job starts there.
        var closing: Set<KafkaTopicPartition> = []
    }

    private let state = Mutex(State())

    var inFlight: Int { state.withLock { $0.inFlight } }

    func assign(_ partitions: [KafkaTopicPartition]) {
        state.withLock { state in
            for partition in partitions where state.partitions[partition] == nil {
                state.partitions[partition] = PartitionOffsets()
            }
        }
    }

    var assigned: [KafkaTopicPartition] { state.withLock { Array($0.partitions.keys) } }

    /// Records a job taken; false when its partition is not (or no longer) assigned here, or when this
    /// offset was taken before (a second delivery of a job already in flight or finished).
    func start(_ partition: KafkaTopicPartition, offset: Int64) -> Bool {
        state.withLock { state in
            guard !state.closing.contains(partition), state.partitions[partition]?.start(offset) == true else {
                return false
            }
            state.inFlight += 1
            return true
        }
    }

    func finish(_ partition: KafkaTopicPartition, offset: Int64) {
        state.withLock { state in
            // A job of a released partition was already taken off the count when it was released.
            if state.partitions[partition]?.finish(offset) == true { state.inFlight -= 1 }
        }
    }

    func outstanding(in partitions: [KafkaTopicPartition]) -> Int {
        state.withLock { state in partitions.reduce(0) { $0 + (state.partitions[$1]?.outstanding ?? 0) } }
    }

    /// Offsets that moved since the last commit (of `only` partitions when given).
    func committable(only: Set<KafkaTopicPartition>? = nil) -> [KafkaTopicPartition: Int64] {
        state.withLock { state in
            var result: [KafkaTopicPartition: Int64] = [:]
            for (partition, offsets) in state.partitions where only?.contains(partition) ?? true {
                if let offset = offsets.committable, offset != state.committed[partition] { result[partition] = offset }
            }
            return result
        }
    }

    func markCommitted(_ offsets: [KafkaTopicPartition: Int64]) {
        state.withLock { state in
            for (partition, offset) in offsets where state.partitions[partition] != nil {
                state.committed[partition] = offset
            }
        }
    }

    /// Per assigned partition: the offset last committed and the jobs not finished.
    func partitionsSnapshot() -> [(partition: KafkaTopicPartition, committed: Int64?, outstanding: Int)] {
        state.withLock { state in
            state.partitions.map { partition, offsets in (partition, state.committed[partition], offsets.outstanding) }
        }
    }

    /// No new job of these partitions starts from now on (their revocation is draining).
    func stopTaking(_ partitions: [KafkaTopicPartition]) {
        state.withLock { $0.closing.formUnion(partitions) }
    }

    func release(_ partitions: [KafkaTopicPartition]) {
        state.withLock { state in
            for partition in partitions {
                state.closing.remove(partition)
                state.inFlight -= state.partitions[partition]?.outstanding ?? 0
                state.partitions[partition] = nil
                state.committed[partition] = nil
            }
        }
    }
}
