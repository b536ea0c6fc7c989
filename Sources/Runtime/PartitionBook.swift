import Kafka
import Synchronization

/// The runtime's bookkeeping of partitions: which are assigned (and under which assignment), the messages
/// taken from each and not yet answered, and what may be committed. State changes happen under one lock;
/// callers act (commit, pause, resume) outside it.
final class PartitionBook: Sendable {
    /// A class, changed in place through the dictionary: a struct changed through `partitions[key]?.…` went
    /// through the dictionary's modify accessors, a dozen allocations a message taken and as many answered.
    private final class Partition {
        var offsets = PartitionOffsets()
        /// The next offset this worker committed, once it committed one during this assignment.
        var committed: Int64?
        /// Which assignment of the partition this is: messages read under an earlier one start no job.
        let generation: UInt64
        /// When a message was last taken or answered, or the commit moved (at first: when it was assigned).
        var lastProgress: ContinuousClock.Instant
        /// The tasks handling this assignment's messages, by offset, each kept only while it runs its handling
        /// (registered and removed under the book's lock, cancelled only under it): a task is alive as long as it
        /// is here, which is what makes keeping an `UnsafeCurrentTask` past its closure sound.
        var running: [Int64: RunningTask] = [:]

        init(generation: UInt64, lastProgress: ContinuousClock.Instant) {
            self.generation = generation
            self.lastProgress = lastProgress
        }
    }

    /// A task handling a message, to cancel. Sendable as the lock it lives under makes it: cancelling a task is
    /// safe from any thread, and it is only ever cancelled while it runs (see `running`).
    private struct RunningTask: @unchecked Sendable {
        let task: UnsafeCurrentTask
    }

    private struct State {
        var partitions: [TopicPartition: Partition] = [:]
        /// Partitions being revoked: assigned until their drain ends, but no new message is taken there.
        var closing: Set<TopicPartition> = []
        var lastGeneration: UInt64 = 0
    }

    private let state = Mutex(State())

    func assign(_ partitions: [TopicPartition]) {
        let now = ContinuousClock.now
        state.withLock { state in
            for partition in partitions where state.partitions[partition] == nil {
                state.lastGeneration += 1
                state.partitions[partition] = Partition(generation: state.lastGeneration, lastProgress: now)
            }
        }
    }

    var assigned: [TopicPartition] { state.withLock { Array($0.partitions.keys) } }

    /// The assignment a message of `partition` read now belongs to (0: the partition is not assigned here).
    func generation(of partition: TopicPartition) -> UInt64 {
        state.withLock { $0.partitions[partition]?.generation ?? 0 }
    }

    /// Records a message taken, as it arrives (before it waits for a slot, so the commit never passes a
    /// message waiting behind another group's). False when its partition is not (or no longer) assigned here;
    /// when the message was read under an earlier assignment of the partition (released, then assigned again:
    /// the message is read again under this one, and taking the stale copy would make the re-read lower
    /// offsets look taken and let the commit pass them); or when this offset was taken before (a second
    /// delivery of a message already in flight or answered).
    func take(_ partition: TopicPartition, offset: Int64, generation: UInt64) -> Bool {
        let now = ContinuousClock.now
        return state.withLock { state in
            guard !state.closing.contains(partition), let taken = state.partitions[partition],
                taken.generation == generation, taken.offsets.start(offset)
            else { return false }
            taken.lastProgress = now
            return true
        }
    }

    /// The consumer's positions, read after every message before them was taken: a partition whose messages
    /// are all answered may be committed that far (past transaction markers).
    func advance(_ positions: [TopicPartition: Int64]) {
        state.withLock { state in
            for (partition, position) in positions {
                state.partitions[partition]?.offsets.advance(toPosition: position)
            }
        }
    }

    /// Records a message answered. A message of an earlier assignment of the partition changes nothing: the
    /// same offset may be in flight again now.
    func finish(_ partition: TopicPartition, offset: Int64, generation: UInt64) {
        let now = ContinuousClock.now
        state.withLock { state in
            guard let answered = state.partitions[partition], answered.generation == generation else { return }
            if answered.offsets.finish(offset) { answered.lastProgress = now }
        }
    }

    /// Records a message left unanswered for its next delivery: its partition's commits stay behind it, and a
    /// drain stops waiting for it.
    func abandon(_ partition: TopicPartition, offset: Int64, generation: UInt64) {
        state.withLock { state in
            // A message of an earlier assignment must not mark the same offset, in flight again, as abandoned.
            guard let left = state.partitions[partition], left.generation == generation else { return }
            left.offsets.abandon(offset)
        }
    }

    /// True while this assignment of the partition is still this member's (draining included): a message of
    /// a partition released since has a new owner, who will handle it again.
    func holds(_ partition: TopicPartition, generation: UInt64) -> Bool {
        state.withLock { $0.partitions[partition]?.generation == generation }
    }

    func outstanding(in partitions: [TopicPartition]) -> Int {
        state.withLock { state in partitions.reduce(0) { $0 + (state.partitions[$1]?.offsets.outstanding ?? 0) } }
    }

    /// Offsets that moved since the last commit (of `only` partitions when given).
    func committable(only: Set<TopicPartition>? = nil) -> [TopicPartition: Int64] {
        state.withLock { state in
            var result: [TopicPartition: Int64] = [:]
            for (key, partition) in state.partitions where only?.contains(key) ?? true {
                if let offset = partition.offsets.committable, offset != partition.committed { result[key] = offset }
            }
            return result
        }
    }

    func markCommitted(_ offsets: [TopicPartition: Int64]) {
        let now = ContinuousClock.now
        state.withLock { state in
            for (key, offset) in offsets {
                guard let partition = state.partitions[key] else { continue }
                partition.committed = offset
                partition.lastProgress = now
            }
        }
    }

    /// Per assigned partition: the offset last committed, the messages not answered, and the last progress.
    func partitionsSnapshot() -> [(
        partition: TopicPartition, committed: Int64?, outstanding: Int, lastProgress: ContinuousClock.Instant
    )] {
        state.withLock { state in
            state.partitions.map { key, partition in
                (key, partition.committed, partition.offsets.outstanding, partition.lastProgress)
            }
        }
    }

    /// No new message of these partitions is taken from now on (their revocation is draining).
    func stopTaking(_ partitions: [TopicPartition]) {
        state.withLock { $0.closing.formUnion(partitions) }
    }

    /// Forgets `partitions`, and cancels the tasks still handling their messages: those messages are their new
    /// owner's now, and a wait that looks at no let-go (a lane Apple paused for minutes, an open circuit) would
    /// otherwise hold its group's slot to its end, then call Apple for nothing.
    func release(_ partitions: [TopicPartition]) {
        state.withLock { state in
            for partition in partitions {
                state.closing.remove(partition)
                for running in (state.partitions[partition]?.running ?? [:]).values { running.task.cancel() }
                state.partitions[partition] = nil
            }
        }
    }

    /// Runs `body`, the handling of the message at `offset` taken under `generation`, as a task ``release(_:)``
    /// cancels when it releases the partition first.
    func handling(_ partition: TopicPartition, offset: Int64, generation: UInt64, _ body: () async -> Void) async {
        withUnsafeCurrentTask { task in
            guard let task else { return }
            let running = RunningTask(task: task)
            state.withLock { state in
                guard let handled = state.partitions[partition], handled.generation == generation else { return }
                handled.running[offset] = running
            }
        }
        await body()
        state.withLock { state in
            guard let handled = state.partitions[partition], handled.generation == generation else { return }
            handled.running[offset] = nil
        }
    }
}
