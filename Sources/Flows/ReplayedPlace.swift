import Messaging

/// Where a message a `dlq replay` put back was first read: its `dlq_first_read`, believed only as an earlier place of
/// the partition the message itself was read from (`own`, its own place or its `parked_from`'s). A producer's header
/// that names another partition, or a later place, could only make a message newer than it is (a consumption
/// answer the newest of its transaction): it is not believed.
enum ReplayedPlace {
    static func original(of message: InboundMessage, own: String) -> String {
        guard let text = DeadLetterHeader.validFirstRead(message), let original = ReadPlace(text),
            let place = ReadPlace(own), original.topicPartition == place.topicPartition,
            original.offset < place.offset
        else { return own }
        return text
    }
}
