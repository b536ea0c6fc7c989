public import Observability

/// Topic administration, for tests, benchmarks and the local demo. Production topics are the operator's.
public enum KafkaAdmin {
    /// The partition count of `topic`, asked with auto-creation off, so a missing topic is reported rather
    /// than created with the broker's defaults. `properties` are the client's (security settings, ...).
    public static func partitionCount(
        of topic: String, properties: [String: String], timeout: Duration = .seconds(10), logger: Logger
    ) async throws -> Int {
        var settings = properties
        settings["allow.auto.create.topics"] = "false"
        let client = try RDKafkaClient.admin(properties: KafkaProperties([], overrides: settings), logger: logger)
        return Int(try await Blocking.run { client.partitionCount(topic: topic, timeout: timeout) }.get())
    }

    /// Creates the topics that do not exist yet; an existing topic is left as it is.
    public static func createTopics(
        bootstrapServers: String, topics: [(name: String, partitions: Int)], timeout: Duration = .seconds(10),
        properties: [String: String] = [:], logger: Logger
    ) async throws {
        let client = try RDKafkaClient.admin(
            properties: KafkaProperties([("bootstrap.servers", bootstrapServers)], overrides: properties),
            logger: logger)
        let failure = await Blocking.run { client.createTopicsBlocking(topics, timeout: timeout) }
        if let failure { throw failure }
    }
}
