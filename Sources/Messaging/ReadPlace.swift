/// Where a record was read, as the worker writes it in `parked_from` and `dlq_first_read`:
/// `TOPIC[PARTITION]@OFFSET`. The one reader of that text.
public struct ReadPlace: Hashable, Sendable, CustomStringConvertible {
    public let topicPartition: TopicPartition
    public let offset: Int64

    public init(_ topicPartition: TopicPartition, offset: Int64) {
        self.topicPartition = topicPartition
        self.offset = offset
    }

    /// The longest text of a place: a topic of Kafka's longest name (249 characters), a partition and an offset.
    public static let maxBytes = 300

    /// Read from its text; nil for anything else: over ``maxBytes``, no topic, a partition or an offset that is not
    /// a number (a topic may hold `[`, `]` and `@`: the last ones are the place's). Read as bytes, not characters:
    /// a character that joins the one after it (U+0605, a prepended mark) would hide the `[` it precedes.
    public init?(_ text: String) {
        let utf8 = text.utf8
        guard utf8.count <= Self.maxBytes, let at = utf8.lastIndex(of: UInt8(ascii: "@")), at > utf8.startIndex
        else { return nil }
        let close = utf8.index(before: at)
        guard utf8[close] == UInt8(ascii: "]"), let bracket = utf8[..<close].lastIndex(of: UInt8(ascii: "[")),
            bracket > utf8.startIndex,
            let partition = Int32(Substring(utf8[utf8.index(after: bracket)..<close])),
            let offset = Int64(Substring(utf8[utf8.index(after: at)...]))
        else { return nil }
        self.init(TopicPartition(topic: String(Substring(utf8[..<bracket])), partition: partition), offset: offset)
    }

    public var description: String { "\(topicPartition)@\(offset)" }
}

/// Where a parked message was first read (its `parked_from` header, a ``ReadPlace``): the route that handles it,
/// and where a dead letter of it leads back to.
public struct ParkedOrigin: Sendable, Equatable {
    public static let header = "parked_from"

    public var topic: String
    public var text: String

    /// Where `message` was read.
    package init(_ message: InboundMessage) {
        topic = message.topic
        text = ReadPlace(message.topicPartition, offset: message.offset).description
    }

    /// The origin a message carries; nil without one, or one that is not a place.
    public init?(of message: InboundMessage) {
        guard let text = message.header(Self.header)?.stringValue, let place = ReadPlace(text) else { return nil }
        topic = place.topicPartition.topic
        self.text = text
    }

    package var messageHeader: MessageHeader { MessageHeader(name: Self.header, string: text) }
}
