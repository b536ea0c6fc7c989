/// An error from the Kafka layer: librdkafka's own error code, or one of this layer's.
///
/// `isRetriable` says the same operation may succeed later (a broker down, a timeout, a full queue);
/// `isFatal` says the client instance is unusable and must be recreated.
public struct KafkaError: Error, Sendable, CustomStringConvertible {
    /// Open set of codes: librdkafka's `rd_kafka_resp_err_t` values, plus this layer's below -1000.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int32
        public let name: String

        init(rawValue: Int32, name: String) {
            self.rawValue = rawValue
            self.name = name
        }

        public var description: String { name }

        public static let invalidConfiguration = Code(rawValue: -1001, name: "INVALID_CONFIGURATION")
        public static let closed = Code(rawValue: -1002, name: "CLIENT_CLOSED")
        // librdkafka's codes the layer names are in RDKafka/KafkaError+RDKafka.swift.
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
    public var isMissingTopic: Bool { Self.missingTopicCodes.contains(code.rawValue) }

    init(code: Code, reason: String, isRetriable: Bool = false, isFatal: Bool = false, property: String? = nil) {
        self.code = code
        self.reason = reason
        self.isRetriable = isRetriable
        self.isFatal = isFatal
        self.property = property
    }

    static func invalidConfiguration(key: String, reason: String) -> KafkaError {
        KafkaError(code: .invalidConfiguration, reason: reason, property: key)
    }

    static let closed = KafkaError(code: .closed, reason: "the Kafka client is closed")
}
