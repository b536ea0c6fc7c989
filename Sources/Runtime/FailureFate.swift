package import Messaging
package import Vocabulary

/// What becomes of a message whose handler threw: the runtime's contract with every handler. Only what can never
/// succeed is dead-lettered with the handler's reason; a failure that may heal (a service not answering, a
/// certificate chain whose revocation status is not known yet, an error nobody classified) is handled again, in
/// the message's slot, after the retry policy's backoff, and only past `retry.max_attempts` handlings does it go
/// to the dead-letter topic, as `retries_exhausted`: the reason the runbook says to replay.
///
/// | the handler threw                                  | fate                                            |
/// |----------------------------------------------------|-------------------------------------------------|
/// | ``LetGo``, `CancellationError`                      | let go: never committed past, delivered again   |
/// | an error ``MessageHandler/isPermanent(_:)`` holds   | dead letter, ``MessageHandler/deadLetterReason`` |
/// | anything else, before its budget                   | handled again after the backoff                 |
/// | anything else, its budget spent                    | dead letter, `retries_exhausted`                |
package enum FailureFate: Equatable, Sendable {
    /// Left for its next delivery (the worker stopping, its partition moved).
    case letGo
    /// Handled again after `after`.
    case retry(after: Duration)
    /// To the dead-letter topic with this reason.
    case deadLetter(DeadLetterReason)

    /// The fate of a message whose handling threw `error` for the `attempts`-th time.
    package static func of(
        _ error: any Error, attempts: Int, handler: any MessageHandler, policy: RetryPolicy,
        random: Double = .random(in: 0...1)
    ) -> FailureFate {
        if error is LetGo || error is CancellationError { return .letGo }
        if handler.isPermanent(error) { return .deadLetter(handler.deadLetterReason) }
        guard policy.mayRetry(afterAttempts: attempts) else { return .deadLetter(.retriesExhausted) }
        return .retry(after: policy.delay(afterAttempts: attempts, retryAfter: nil, random: random))
    }
}
