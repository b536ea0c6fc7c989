public import Observability

/// What a handler may ask of the runtime while it handles one message: whether to let it go, retries of the
/// services it depends on, and spans of its steps. The runtime over Kafka implements it; so does
/// ``StandaloneHandlingContext``, for a tool or a test of a handler's rules.
public protocol HandlingContext: Sendable {
    /// The message being handled.
    var message: InboundMessage { get }

    /// What the runtime read of it as it took it (``MessageHandler/intake(of:)``).
    var intake: Intake { get }

    /// The message's `process` span when the worker traces.
    var span: Span? { get }

    /// True when the message must be left for its next delivery: the worker is stopping, or its partition was
    /// released (its new owner handles the message again).
    var mustLetGo: Bool { get }

    /// Repeats `body` with backoff until it succeeds; throws ``LetGo`` when the message must be let go (after
    /// the first attempt), and rethrows an error that will never heal (the handler's
    /// ``MessageHandler/isPermanent(_:)``). For the worker's own services (the ledger, the broker), whose
    /// failures are never the player's. Each attempt is timed in `stage` and each failure counted under
    /// `operation` (`receipt_worker_failures_total`), so a loop that never ends still shows; after three
    /// failures in a row the operation makes the worker unready until it succeeds again.
    func retrying<T: Sendable>(
        _ operation: String, stage: Histogram?, _ body: @Sendable () async throws -> T
    ) async throws -> T
}

extension HandlingContext {
    /// ``retrying(_:stage:_:)`` untimed.
    public func retrying<T: Sendable>(_ operation: String, _ body: @Sendable () async throws -> T) async throws -> T {
        try await retrying(operation, stage: nil, body)
    }

    /// Throws ``LetGo`` when the message must be let go.
    public func checkLetGo() throws {
        if mustLetGo { throw LetGo() }
    }

    /// Sleeps, then throws ``LetGo`` if the message must be let go meanwhile: looked at every 250 ms, so a job
    /// whose partition was revoked (or a stop) does not sit out a backoff of seconds before its partition's drain.
    public func sleep(for delay: Duration) async throws {
        try await LetGo.sleep(for: delay, unless: { mustLetGo })
        try checkLetGo()
    }

    /// Runs `body` in a child span of the message's (a call to Apple, say), failed when it throws.
    public func traced<T: Sendable>(
        _ name: String, kind: SpanKind = .client, attributes: [(String, SpanValue)] = [],
        _ body: () async throws -> T
    ) async throws -> T {
        guard let span else { return try await body() }
        return try await span.inChild(name, kind: kind, attributes: attributes, body)
    }
}

extension LetGo {
    /// Sleeps `delay`, waking every 250 ms to end early, with ``LetGo``, when `letGo()` says so (or the task is
    /// cancelled).
    public static func sleep(for delay: Duration, unless letGo: () -> Bool) async throws {
        let end = ContinuousClock.now + delay
        while ContinuousClock.now < end {
            if letGo() { throw LetGo() }
            try? await Task.sleep(for: min(.milliseconds(250), end - ContinuousClock.now))
            if Task.isCancelled { throw LetGo() }
        }
    }
}

/// A context outside any runtime (a tool, a test of a handler's rules): never let go; a service that fails is
/// retried with `retry`'s backoff until it answers or fails for good.
public struct StandaloneHandlingContext: HandlingContext {
    public let message: InboundMessage
    public let intake: Intake
    private let isPermanent: @Sendable (any Error) -> Bool
    private let retry: RetryPolicy
    private let logger: Logger

    public init(
        message: InboundMessage, handler: any MessageHandler, retry: RetryPolicy = RetryPolicy(),
        logger: Logger = Logger(label: "handler")
    ) {
        self.message = message
        self.intake = handler.intake(of: message)
        self.isPermanent = { handler.isPermanent($0) }
        self.retry = retry
        self.logger = logger
    }

    public var span: Span? { nil }
    public var mustLetGo: Bool { false }

    public func retrying<T: Sendable>(
        _ operation: String, stage: Histogram?, _ body: @Sendable () async throws -> T
    ) async throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await body()
            } catch {
                if error is CancellationError || isPermanent(error) { throw error }
                logger.warning("\(operation) failed; retrying", ["error": "\(error)", "attempt": String(attempt)])
                try await Task.sleep(for: retry.delay(afterAttempts: min(attempt, 8), retryAfter: nil))
            }
        }
    }
}
