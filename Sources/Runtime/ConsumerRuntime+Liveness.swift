import Kafka
import Observability
import Synchronization

/// A liveness alarm for partitions, because a stall can have causes nobody foresaw (an intake pause that
/// outlived its partition, a message that never ends, a consumer that stopped fetching): per partition the
/// lag, and how long it went without progress (a message taken or answered, a commit) while it had lag.
/// The commit follows the consumer's position past transaction markers, so a transactional producer's
/// commit marker is not an unread message.
extension ConsumerRuntime {
    struct PartitionStall: Sendable {
        let partition: TopicPartition
        let lag: Int64
        let seconds: Int
    }

    /// Measures every assigned partition's lag now and then, and warns once when a partition with lag has
    /// made no progress for the stall timeout (and once when it moves again).
    func livenessLoop() async {
        let interval = max(.milliseconds(100), min(.seconds(10), configuration.stallTimeout / 4))
        var warned: Set<TopicPartition> = []
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            // The producer serves more than the answers (the receiver in this process, the chores): its fatal
            // error ends the runtime even while no message is being answered.
            if let fatal = producer.fatalError { producerFailed(fatal) }
            await measureLags()
            let stalls = stalledPartitions()
            for stall in stalls where !warned.contains(stall.partition) {
                logger.warning(
                    "partition stalled: it has lag and made no progress",
                    [
                        "partition": stall.partition.description, "lag": String(stall.lag),
                        "seconds": String(stall.seconds),
                        "messages_outstanding": String(book.outstanding(in: [stall.partition])),
                        "intake_paused": String(consumer.isIntakePaused),
                    ])
            }
            let stalled = Set(stalls.map(\.partition))
            for partition in warned.subtracting(stalled) {
                logger.info("partition moving again", ["partition": partition.description])
            }
            warned = stalled
        }
    }

    /// Partitions with lag that made no progress for the stall timeout. A topic (or a lane's partition of the
    /// park topic) the runtime paused because a group it feeds is full (one game's Apple lane paused for an hour)
    /// is waiting on purpose, and said so by `receipt_worker_group_full_seconds`: its partitions are not
    /// stalled, and the replica stays ready (an alert on that gauge tells how long).
    /// Why the runtime is wedged (empty when it is not), for `/healthz`: a partition with lag that has made no
    /// progress for five stall timeouts while none of its messages is in flight. A partition whose messages
    /// wait on Apple (in a backoff, at an open circuit) has messages in flight and is not wedged: restarting
    /// the pod would not make Apple answer. Nothing taken while messages wait is what a restart mends.
    ///
    /// Two stalls are not wedges, because a restart mends neither: commits failing (the ledger or the broker
    /// down: every partition's commit stands still while its messages are answered), and the whole intake
    /// paused for the replica's byte budget (its messages wait on Apple in other partitions' slots).
    public var wedged: [String] {
        guard commitsSucceed, consumer.pausedTopics != nil else { return [] }
        return stalledPartitions().filter { stall in
            Double(stall.seconds) >= 5 * configuration.stallTimeout.inSeconds
                && book.outstanding(in: [stall.partition]) == 0
        }.map { "partition \($0.partition) wedged: lag \($0.lag), nothing taken for \($0.seconds) s" }
    }

    func stalledPartitions() -> [PartitionStall] {
        let timeout = configuration.stallTimeout.inSeconds
        return idleness().compactMap { idle in
            guard let lag = idle.lag, idle.seconds >= timeout else { return nil }
            return PartitionStall(partition: idle.partition, lag: lag, seconds: Int(idle.seconds))
        }
    }

    /// Per assigned partition: its lag when it has some, and seconds since its last progress: 0 without lag, and 0
    /// while the runtime keeps it paused on purpose (a full group's topic, a held-back game's lane of the park
    /// topic): `receipt_worker_partition_idle_seconds` and the stall alarms never read a game held back as stalled.
    func idleness() -> [(partition: TopicPartition, lag: Int64?, seconds: Double)] {
        let lags = state.withLock { $0.lags }
        let now = ContinuousClock.now
        let waitingOnPurpose = consumer.pausedTopics ?? []
        let partitionsWaiting = consumer.pausedPartitions
        return book.partitionsSnapshot().map { partition in
            guard let lag = lags[partition.partition], lag > 0 else { return (partition.partition, nil, 0) }
            if waitingOnPurpose.contains(partition.partition.topic) || partitionsWaiting.contains(partition.partition) {
                return (partition.partition, lag, 0)
            }
            return (partition.partition, lag, (now - partition.lastProgress).inSeconds)
        }
    }

    /// Lag = the broker's high watermark minus the committed offset (this member's last commit, else the
    /// group's, else the oldest offset held). A partition whose watermarks cannot be read keeps its last lag.
    private func measureLags() async {
        let snapshot = book.partitionsSnapshot()
        let uncommitted = snapshot.filter { $0.committed == nil }.map(\.partition)
        var groupCommitted: [TopicPartition: Int64] = [:]
        if !uncommitted.isEmpty {
            do {
                groupCommitted = try await consumer.committed(uncommitted, timeout: .seconds(5))
            } catch {
                logger.debug("cannot read committed offsets for the lag", ["error": "\(error)"])
            }
        }
        var measured: [TopicPartition: Int64] = [:]
        for partition in snapshot {
            do {
                let marks = try await consumer.watermarks(partition.partition, timeout: .seconds(5))
                let committed = partition.committed ?? groupCommitted[partition.partition] ?? marks.low
                measured[partition.partition] = max(0, marks.high - committed)
            } catch {
                logger.debug("cannot read watermarks for the lag", ["partition": partition.partition.description])
            }
        }
        let assigned = Set(book.assigned)
        state.withLock { $0.measured(measured, assigned: assigned) }
    }
}
