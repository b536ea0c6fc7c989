public import Vocabulary

/// What one topic's messages become. The runtime (`Runtime`'s `ConsumerRuntime`, over Kafka) takes each message, gives it a slot of
/// its group's budget, calls ``handle(_:context:)``, publishes the outcome, and commits behind it; a handler
/// knows nothing of slots, offsets, commits or Kafka's producer.
public protocol MessageHandler: Sendable {
    /// The group of a message: the messages of one group share its budget of slots and bytes, so a group
    /// whose messages wait (an app whose Apple lane is paused) never holds what another group needs. Read
    /// cheaply: it is called for every message as it is taken.
    func group(of message: InboundMessage) -> String

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

    /// Where the wait of whoever waits on this message began, and the app it is about (``WaitStart``): measured to
    /// its answer, and while unanswered in the lag gauges. Read cheaply, for every message as it is taken; nil:
    /// not measured.
    func waitStart(of message: InboundMessage) -> WaitStart?

    /// Told once the broker acknowledged the records of a `.publish` outcome (what follows a published answer:
    /// telling Apple a granted transaction is finished). Must not block: it runs in the message's slot.
    func delivered(_ records: [OutboundRecord])
}

extension MessageHandler {
    public func delivered(_ records: [OutboundRecord]) {}
    public func waitStart(of message: InboundMessage) -> WaitStart? { nil }
}
