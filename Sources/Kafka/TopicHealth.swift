public import Observability

/// Whether a topic can take records now, as the broker says: its partitions, those without a leader (a
/// record for them cannot be written), and whether this client may write to it (the broker's authorized
/// operations, KIP-430; nil when the broker does not say).
public struct TopicHealth: Sendable, Equatable {
    public var partitions: Int
    public var leaderless: [Int32]
    public var writable: Bool?

    /// Why a record might not be written, for people; empty when nothing is known to stand in the way.
    public func problems(topic: String) -> [String] {
        var problems: [String] = []
        if !leaderless.isEmpty {
            problems.append(
                "topic \(topic): partition(s) \(leaderless.map(String.init).joined(separator: ",")) have no leader")
        }
        if writable == false { problems.append("topic \(topic): this client is not authorized to write to it") }
        return problems
    }
}

extension KafkaAdmin {
    /// The health of `topic` (``TopicHealth``): one metadata request, and one DescribeTopics request for the
    /// authorized operations. Throws when the topic does not exist or the broker does not answer.
    public static func topicHealth(
        of topic: String, properties: [String: String], timeout: Duration = .seconds(10), logger: Logger
    ) async throws -> TopicHealth {
        var settings = properties
        settings["allow.auto.create.topics"] = "false"
        let client = try RDKafkaClient.admin(properties: KafkaProperties([], overrides: settings), logger: logger)
        return try await Blocking.run { client.topicHealth(topic: topic, timeout: timeout) }.get()
    }
}
