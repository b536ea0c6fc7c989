import CRdKafka

/// librdkafka properties as this layer hands them over: typed fields of the producer and consumer
/// configurations first, then any `kafka.*` property the operator set, which wins.
struct KafkaProperties {
    private(set) var entries: [(key: String, value: String)] = []

    init(_ typed: [(String, String)], overrides: [String: String]) {
        var seen: [String: Int] = [:]
        for (key, value) in typed + overrides.sorted(by: { $0.key < $1.key }) {
            if let index = seen[key] {
                entries[index].value = value
            } else {
                seen[key] = entries.count
                entries.append((key, value))
            }
        }
    }

    subscript(key: String) -> String? { entries.last(where: { $0.key == key })?.value }

    /// A new `rd_kafka_conf_t`, owned by the caller. Errors name the key, and never repeat the value of a
    /// key that may hold a secret.
    func makeConf() throws(KafkaError) -> OpaquePointer {
        guard let conf = rd_kafka_conf_new() else {
            throw KafkaError(code: .invalidConfiguration, reason: "rd_kafka_conf_new failed")
        }
        var errstr = [CChar](repeating: 0, count: 512)
        for (key, value) in entries {
            let result = rd_kafka_conf_set(conf, key, value, &errstr, errstr.count)
            guard result == RD_KAFKA_CONF_OK else {
                rd_kafka_conf_destroy(conf)
                let detail = Self.isSensitive(key) ? "invalid value" : errstr.string
                throw .invalidConfiguration(key: key, reason: detail)
            }
        }
        return conf
    }

    static func isSensitive(_ key: String) -> Bool { KafkaError.isSensitiveProperty(key) }
}

extension KafkaError {
    /// Whether a librdkafka property's value is a credential, never to be echoed in errors, logs or
    /// printed configuration.
    public static func isSensitiveProperty(_ key: String) -> Bool {
        let lowered = key.lowercased()
        return ["password", "secret", "jaas", "token", "ssl.key", "keystore", "oauthbearer.config"]
            .contains { lowered.contains($0) }
    }
}
