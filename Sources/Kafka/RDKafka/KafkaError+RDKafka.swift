import CRdKafka

/// librdkafka's side of ``KafkaError``: its codes, and their classification.
extension KafkaError.Code {
    init(_ err: rd_kafka_resp_err_t) {
        self.init(rawValue: err.rawValue, name: String(cString: rd_kafka_err2name(err)))
    }

    public static let messageTooLarge = Self(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
    public static let queueFull = Self(RD_KAFKA_RESP_ERR__QUEUE_FULL)
    public static let messageTimedOut = Self(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
    public static let timedOut = Self(RD_KAFKA_RESP_ERR__TIMED_OUT)
    public static let purged = Self(RD_KAFKA_RESP_ERR__PURGE_QUEUE)
    public static let purgedInFlight = Self(RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
}

extension KafkaError {
    /// From a plain response code, classified with the codes Kafka documents as transient.
    init(_ err: rd_kafka_resp_err_t, reason: String? = nil) {
        let text = reason ?? String(cString: rd_kafka_err2str(err))
        self.init(
            code: Code(err), reason: text, isRetriable: Self.transientCodes.contains(err.rawValue),
            isFatal: err == RD_KAFKA_RESP_ERR__FATAL)
    }

    /// From an `rd_kafka_error_t`, which carries librdkafka's own classification. Destroys it.
    init(consuming error: OpaquePointer) {
        defer { rd_kafka_error_destroy(error) }
        self.init(
            code: Code(rd_kafka_error_code(error)), reason: String(cString: rd_kafka_error_string(error)),
            isRetriable: rd_kafka_error_is_retriable(error) != 0, isFatal: rd_kafka_error_is_fatal(error) != 0)
    }

    /// The topic does not exist, or this client may not use it.
    static let missingTopicCodes: Set<Int32> = Set(
        [
            RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
            RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
        ].map(\.rawValue))

    /// The record will never be accepted.
    static let permanentCodes: Set<Int32> = Set(
        [
            RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE,
            RD_KAFKA_RESP_ERR_INVALID_MSG, RD_KAFKA_RESP_ERR_INVALID_RECORD, RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE,
        ].map(\.rawValue))

    /// Kafka errors that a later attempt may not see: transport, timeouts, leadership and coordinator moves.
    static let transientCodes: Set<Int32> = Set(
        [
            RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__TIMED_OUT,
            RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, RD_KAFKA_RESP_ERR__QUEUE_FULL, RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE,
            RD_KAFKA_RESP_ERR__WAIT_COORD, RD_KAFKA_RESP_ERR__RESOLVE, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
            RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
            RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION, RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS,
            RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
            RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
            RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR, RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH,
            RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH,
        ].map(\.rawValue))
}
