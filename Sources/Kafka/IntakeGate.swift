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
    private let paused = Mutex(false)

    var isPaused: Bool { paused.withLock { $0 } }

    /// Pauses (or resumes) every partition assigned now and every one assigned later. Returns false when the
    /// intake was already in that state (nothing done).
    func set(paused wanted: Bool, client: RDKafkaClient) throws(KafkaError) -> Bool {
        try paused.withLock { (paused: inout Bool) throws(KafkaError) -> Bool in
            guard paused != wanted else { return false }
            var raw: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
            let err = rd_kafka_assignment(client.handle, &raw)
            guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let raw else { throw KafkaError(err) }
            let assignment = TopicPartitionList(adopting: raw)
            try Self.apply(paused: wanted, to: assignment.pointer, client: client)
            paused = wanted
            return true
        }
    }

    /// Runs `assign` (librdkafka's assign or incremental assign) and puts the new partitions in the intake's
    /// state, under the lock, so no pause or resume can slip between the two. On the poll thread.
    func assign(
        _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>, client: RDKafkaClient,
        _ assign: () -> Void
    ) throws(KafkaError) {
        try paused.withLock { (paused: inout Bool) throws(KafkaError) in
            assign()
            try Self.apply(paused: paused, to: partitions, client: client)
        }
    }

    /// Clears the application pause of partitions about to be released, then runs `unassign`, under the
    /// lock: a partition leaves this member unpaused whatever the intake's state. On the poll thread.
    func release(
        _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>, client: RDKafkaClient,
        _ unassign: () -> Void
    ) throws(KafkaError) {
        try paused.withLock { (_: inout Bool) throws(KafkaError) in
            defer { unassign() }
            try Self.apply(paused: false, to: partitions, client: client)
        }
    }

    private static func apply(
        paused: Bool, to partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>, client: RDKafkaClient
    ) throws(KafkaError) {
        guard partitions.pointee.cnt > 0 else { return }
        let err =
            paused
            ? rd_kafka_pause_partitions(client.handle, partitions)
            : rd_kafka_resume_partitions(client.handle, partitions)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err) }
    }
}
