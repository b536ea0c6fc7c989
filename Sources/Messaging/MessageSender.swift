/// Where a part that is not a consumed message's handler sends messages (a chore's events, a receiver's
/// notifications): the Kafka producer (`KafkaProducer`), or a list in a test.
public protocol MessageSender: Sendable {
    /// Sends `message` and returns where the broker stored it, once it acknowledged it.
    func send(_ message: OutboundMessage) async throws -> DeliveryReport
}
