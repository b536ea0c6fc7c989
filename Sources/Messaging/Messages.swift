public import Foundation
import Vocabulary

// The messages the flows consume and send, as plain values: the Kafka client (`Kafka`) reads and writes them, the
// flows and their tests need nothing else of it.

/// A topic and a partition.
public struct TopicPartition: Hashable, Sendable, CustomStringConvertible {
    public let topic: String
    public let partition: Int32

    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public var description: String { "\(topic)[\(partition)]" }
}

/// One header of a message. Kafka allows repeated names and null values.
///
/// A value given as text is kept as that text, not copied into bytes: the headers of every event published (its
/// CloudEvents attributes, its trace) are copied once, into the Kafka client's own record, and an array each on the
/// way was an allocation a header.
public struct MessageHeader: Hashable, Sendable {
    private enum Value: Sendable {
        case bytes([UInt8]?)
        case text(String)
    }

    public let name: String
    private let stored: Value

    public init(name: String, value: [UInt8]?) {
        self.name = name
        stored = .bytes(value)
    }

    public init(name: String, string: String) {
        self.name = name
        stored = .text(string)
    }

    /// The value's bytes; nil for a header without a value.
    public var value: [UInt8]? {
        switch stored {
        case .bytes(let bytes): bytes
        case .text(let text): Array(text.utf8)
        }
    }

    /// The value as UTF-8 text, when it is.
    public var stringValue: String? {
        switch stored {
        case .bytes(let bytes): bytes.flatMap { UTF8Text.string($0) }
        case .text(let text): text
        }
    }

    /// `body` with the value's bytes (nil for a header without a value), without copying them.
    public func withValueBytes<Result>(_ body: (UnsafeRawBufferPointer?) throws -> Result) rethrows -> Result {
        switch stored {
        case .bytes(let bytes): try bytes.map { try $0.withUnsafeBytes(body) } ?? body(nil)
        case .text(var text): try text.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        }
    }

    /// Equal by name and value's bytes, however each was given.
    public static func == (lhs: MessageHeader, rhs: MessageHeader) -> Bool {
        lhs.name == rhs.name && lhs.value == rhs.value
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(value)
    }
}

/// A message to send. `partition` nil lets the partitioner choose from the key.
public struct OutboundMessage: Sendable {
    public var topic: String
    public var partition: Int32?
    public var key: [UInt8]?
    public var value: [UInt8]
    public var headers: [MessageHeader]

    public init(
        topic: String, partition: Int32? = nil, key: [UInt8]? = nil, value: [UInt8], headers: [MessageHeader] = []
    ) {
        self.topic = topic
        self.partition = partition
        self.key = key
        self.value = value
        self.headers = headers
    }
}

/// Where the broker stored a message sent.
public struct DeliveryReport: Sendable, Hashable {
    public let topic: String
    public let partition: Int32
    public let offset: Int64

    public init(topic: String, partition: Int32, offset: Int64) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
    }
}

/// A message consumed.
public struct InboundMessage: Sendable {
    public let topic: String
    public let partition: Int32
    public let offset: Int64
    public let key: [UInt8]?
    public let value: [UInt8]
    public let headers: [MessageHeader]
    /// The record's timestamp, when the broker or producer set one.
    public let timestamp: Date?

    public var topicPartition: TopicPartition { TopicPartition(topic: topic, partition: partition) }

    /// The first header with this name.
    public func header(_ name: String) -> MessageHeader? { headers.first { $0.name == name } }

    public init(
        topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8], headers: [MessageHeader],
        timestamp: Date?
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp = timestamp
    }
}
