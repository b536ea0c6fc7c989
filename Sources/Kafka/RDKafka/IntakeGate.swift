import CRdKafka
import Synchronization

/// Whether the application wants its partitions fetched, kept beside the assignment it applies to.
///
/// librdkafka keeps an application pause on a partition across a revoke and a re-assign, and clears only
/// its own (library) pause when the partition comes back. A flag kept by the caller and applied to the
/// partitions it believed assigned drifted from that: a partition paused, revoked and handed back was never
/// fetched again. Here one lock covers the flag and every librdkafka pause, resume, assign and unassign
/// call, and every newly assigned partition is put explicitly in the state the flag says.
final class IntakeGate: Sendable {
    /// What the application wants paused: every topic, or some topics and some partitions.
    struct Pause: Equatable, Sendable {
        var all = false
        var topics: Set<String> = []
        var partitions: Set<TopicPartition> = []

        func pauses(_ partition: TopicPartition) -> Bool {
            all || topics.contains(partition.topic) || partitions.contains(partition)
        }
    }

    private let state = Mutex(Pause())

    var pause: Pause { state.withLock { $0 } }

    /// Pauses the partitions the wanted state pauses and resumes the others, those assigned now and those
    /// assigned later. Returns false when the intake was already in that state (nothing done).
    func set(_ wanted: Pause, client: RDKafkaClient) throws(KafkaError) -> Bool {
        try state.withLock { (current: inout Pause) throws(KafkaError) -> Bool in
            guard current != wanted else { return false }
            var raw: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
            let err = rd_kafka_assignment(client.handle, &raw)
            guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let raw else { throw KafkaError(err) }
            let assigned = TopicPartitionList(adopting: raw).partitions()
            let changed = assigned.filter { current.pauses($0) != wanted.pauses($0) }
            try Self.apply(paused: true, to: changed.filter { wanted.pauses($0) }, client: client)
            try Self.apply(paused: false, to: changed.filter { !wanted.pauses($0) }, client: client)
            current = wanted
            return true
        }
    }

    /// Runs `assign` (librdkafka's assign or incremental assign) and puts the new partitions in the intake's
    /// state, under the lock, so no pause or resume can slip between the two. On the poll thread.
    func assign(
        _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>, client: RDKafkaClient,
        _ assign: () -> Void
    ) throws(KafkaError) {
        try state.withLock { (pause: inout Pause) throws(KafkaError) in
            assign()
            let assigned = TopicPartitionList.borrowing(partitions)
            try Self.apply(paused: true, to: assigned.filter { pause.pauses($0) }, client: client)
            try Self.apply(paused: false, to: assigned.filter { !pause.pauses($0) }, client: client)
        }
    }

    /// Clears the application pause of partitions about to be released, then runs `unassign`, under the
    /// lock: a partition leaves this member unpaused whatever the intake's state. On the poll thread.
    func release(
        _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>, client: RDKafkaClient,
        _ unassign: () -> Void
    ) throws(KafkaError) {
        try state.withLock { (_: inout Pause) throws(KafkaError) in
            defer { unassign() }
            try Self.apply(paused: false, to: TopicPartitionList.borrowing(partitions), client: client)
        }
    }

    private static func apply(paused: Bool, to partitions: [TopicPartition], client: RDKafkaClient)
        throws(KafkaError)
    {
        guard !partitions.isEmpty else { return }
        let list = TopicPartitionList(partitions)
        let err =
            paused
            ? rd_kafka_pause_partitions(client.handle, list.pointer)
            : rd_kafka_resume_partitions(client.handle, list.pointer)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err) }
    }
}
