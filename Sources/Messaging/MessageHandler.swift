public import Vocabulary

/// What one topic's messages become. The runtime (`Runtime`'s `ConsumerRuntime`, over Kafka) takes each message,
/// reads its ``Intake`` once, gives it a slot of its group's budget, calls ``handle(_:context:)``, publishes the
/// disposition, and commits behind it; a handler knows nothing of slots, offsets, commits or Kafka's producer.
public protocol MessageHandler: Sendable {
    /// What the runtime needs of a message as it takes it (its group, where its wait began), read once: what
    /// the handler read to know them rides along (``Intake/reading``) and comes back in
    /// ``HandlingContext/intake``, so the message's bytes are not read again. Called for every message taken.
    func intake(of message: InboundMessage) -> Intake

    /// Turns a message into its outcome. Steps that depend on a service (a ledger) go through
    /// ``HandlingContext/retrying(_:stage:_:)``; when the message must be left for its next delivery (the
    /// worker is stopping, or its partition has a new owner), that throws ``LetGo``, and so may the handler.
    /// What becomes of an error it throws is the runtime's `FailureFate`: one for which ``isPermanent(_:)`` holds (a value the
    /// ledger refuses for good) ends as a dead letter with ``deadLetterReason``; any other is taken as transient,
    /// and the message is handled again after a backoff (so a handler must be safe to run again), up to
    /// `retry.max_attempts` handlings, then dead-lettered as `retries_exhausted`.
    func handle(_ message: InboundMessage, context: any HandlingContext) async throws -> Disposition

    /// Whether an error will never heal by retrying: the message is dead-lettered at once.
    func isPermanent(_ error: any Error) -> Bool

    /// The dead-letter reason of a message whose handling failed for good (``isPermanent(_:)``).
    var deadLetterReason: DeadLetterReason { get }

    /// Told once the broker acknowledged the records of a `.publish` outcome (what follows a published answer:
    /// telling Apple a granted transaction is finished). Must not block: it runs in the message's slot.
    func delivered(_ records: [OutboundRecord])
}

extension MessageHandler {
    public func delivered(_ records: [OutboundRecord]) {}
}

/// What the runtime learns of a message as it takes it.
public struct Intake: Sendable {
    /// The messages of one group share its budget of slots and bytes, so a group whose messages wait (an app
    /// whose Apple lane is paused) never holds what another group needs.
    public var group: String
    /// Where the wait of whoever waits on this message began, and the app it is about: measured to its answer,
    /// and while unanswered in the lag gauges. Nil: not measured.
    public var waitStart: WaitStart?
    /// What the handler read of the message to know these (a parsed job), for ``MessageHandler/handle(_:context:)``.
    public var reading: (any Sendable)?

    public init(group: String, waitStart: WaitStart? = nil, reading: (any Sendable)? = nil) {
        self.group = group
        self.waitStart = waitStart
        self.reading = reading
    }
}
