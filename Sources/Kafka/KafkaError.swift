import CRdKafka

/// An error from the Kafka layer: librdkafka's own error code, or one of this layer's.
///
/// `isRetriable` says the same operation may succeed later (a broker down, a timeout, a full queue);
/// `isFatal` says the client instance is unusable and must be recreated.
public struct KafkaError: Error, Sendable, CustomStringConvertible {
    /// Open set of codes: librdkafka's `rd_kafka_resp_err_t` values, plus this layer's below -1000.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int32
        public let name: String

        init(_ err: rd_kafka_resp_err_t) {
            self.rawValue = err.rawValue
            self.name = String(cString: rd_kafka_err2name(err))
        }

        private init(rawValue: Int32, name: String) {
            self.rawValue = rawValue
            self.name = name
        }

        public var description: String { name }

        public static let invalidConfiguration = Code(rawValue: -1001, name: "INVALID_CONFIGURATION")
        public static let closed = Code(rawValue: -1002, name: "CLIENT_CLOSED")
        public static let messageTooLarge = Code(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
        public static let queueFull = Code(RD_KAFKA_RESP_ERR__QUEUE_FULL)
        public static let messageTimedOut = Code(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
        public static let timedOut = Code(RD_KAFKA_RESP_ERR__TIMED_OUT)
        public static let purged = Code(RD_KAFKA_RESP_ERR__PURGE_QUEUE)
        public static let purgedInFlight = Code(RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
    }

    public let code: Code
    /// For people. Never holds a configuration value of a sensitive key. For a configuration error about one
    /// property, what is wrong with it (``property`` names it).
    public let reason: String
    public let isRetriable: Bool
    public let isFatal: Bool
    /// For a configuration error: the librdkafka property it is about (`acks`), when one is; its key in the
    /// worker's configuration is `kafka.` and this.
    public let property: String?

    public var description: String {
        "Kafka error \(code.name): \(property.map { "kafka.\($0): " } ?? "")\(reason)"
    }

    /// The same record will never be accepted: it is too large for the client or the broker, or invalid.
    /// (A missing topic or a refused authorization may be fixed by an operator: not permanent.)
    public var isPermanent: Bool { Self.permanentCodes.contains(code.rawValue) }

    /// The topic does not exist, or this client may not use it: an operator must act.
    public var isMissingTopic: Bool {
        [
            RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
            RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
        ].map(\.rawValue).contains(code.rawValue)
    }

    private static let permanentCodes: Set<Int32> = Set(
        [
            RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE,
            RD_KAFKA_RESP_ERR_INVALID_MSG, RD_KAFKA_RESP_ERR_INVALID_RECORD, RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE,
        ].map(\.rawValue))

    init(code: Code, reason: String, isRetriable: Bool = false, isFatal: Bool = false, property: String? = nil) {
        self.code = code
        self.reason = reason
        self.isRetriable = isRetriable
        self.isFatal = isFatal
        self.property = property
    }

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

    static func invalidConfiguration(key: String, reason: String) -> KafkaError {
        KafkaError(code: .invalidConfiguration, reason: reason, property: key)
    }

    static let closed = KafkaError(code: .closed, reason: "the Kafka client is closed")

    /// Kafka errors that a later attempt may not see: transport, timeouts, leadership and coordinator moves.
    private static let transientCodes: Set<Int32> = Set(
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
