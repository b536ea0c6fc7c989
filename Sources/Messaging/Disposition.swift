public import Vocabulary

/// What becomes of a handled message: the records to publish, a dead letter, or nothing yet (let go). Only a
/// message whose disposition the broker acknowledged is committed past.
public enum Disposition: Sendable {
    /// Publish these records (none: nothing to say), then the message is answered.
    case publish([OutboundRecord])
    /// Publish `after` (if any), then copy the message to the dead-letter topic with `letter`'s headers.
    case deadLetter(DeadLetter, after: [OutboundRecord] = [])
    /// Leave it unanswered: it is never committed past, so it is delivered again (after a restart, or to the
    /// partition's next owner).
    case letGo
}

/// A record to publish, and to be acknowledged by the broker, before the message counts as answered.
public struct OutboundRecord: Sendable, Equatable {
    public var topic: String
    public var key: String
    public var value: [UInt8]
    public var headers: [MessageHeader]

    public init(topic: String, key: String, value: [UInt8], headers: [MessageHeader]) {
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
    }
}

/// Why a message goes to the dead-letter topic (docs/contract.md section 5).
public struct DeadLetter: Sendable, Equatable {
    /// `dlq_reason`.
    public var reason: DeadLetterReason
    /// `dlq_error`: for people; never a receipt, a token or a secret.
    public var error: String
    /// `dlq_attempts`: calls made to Apple for the message.
    public var attempts: Int

    public init(reason: DeadLetterReason, error: String, attempts: Int = 0) {
        self.reason = reason
        self.error = error
        self.attempts = attempts
    }
}

/// Thrown when a message must be left for its next delivery: the worker is stopping, or the message's
/// partition was released to another member.
public struct LetGo: Error, Sendable {
    public init() {}
}
