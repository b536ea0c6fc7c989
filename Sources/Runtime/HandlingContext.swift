import Kafka
import Observability

/// What a handler may ask of the runtime while it handles one message: whether to let it go, and retries of
/// the services it depends on.
public final class HandlingContext: Sendable {
    public let message: InboundMessage
    private let retries: ServiceRetries
    private let isPermanent: @Sendable (any Error) -> Bool
    private let letGo: @Sendable () -> Bool
    /// The message's `process` span when the worker traces (``RuntimeConfiguration/tracer``).
    public let span: Span?

    init(
        message: InboundMessage, retries: ServiceRetries, isPermanent: @escaping @Sendable (any Error) -> Bool,
        letGo: @escaping @Sendable () -> Bool, span: Span? = nil
    ) {
        self.message = message
        self.retries = retries
        self.isPermanent = isPermanent
        self.letGo = letGo
        self.span = span
    }

    /// Runs `body` in a child span of the message's (a call to Apple, say), failed when it throws.
    public func traced<T: Sendable>(
        _ name: String, kind: SpanKind = .client, attributes: [(String, SpanValue)] = [],
        _ body: () async throws -> T
    ) async throws -> T {
        guard let span else { return try await body() }
        let child = span.child(name, kind: kind, attributes: attributes)
        do {
            let result = try await body()
            child.end()
            return result
        } catch {
            child.fail("\(error)")
            child.end()
            throw error
        }
    }

    /// A context outside any runtime (a tool, a test of a handler's rules): never let go; a service that fails
    /// is retried with `retry`'s backoff until it answers or fails for good.
    public convenience init(
        message: InboundMessage, handler: any MessageHandler, retry: RetryPolicy = RetryPolicy(),
        logger: Logger = Logger(label: "handler")
    ) {
        self.init(
            message: message, retries: ServiceRetries(retry: retry, metrics: nil, logger: logger),
            isPermanent: { handler.isPermanent($0) }, letGo: { false })
    }

    /// True when the message must be left for its next delivery: the worker is stopping, or its partition was
    /// released (its new owner handles the message again).
    public var mustLetGo: Bool { letGo() }

    /// Throws ``LetGo`` when the message must be let go.
    public func checkLetGo() throws {
        if mustLetGo { throw LetGo() }
    }

    /// Sleeps, then throws ``LetGo`` if the message must be let go meanwhile.
    public func sleep(for delay: Duration) async throws {
        try? await Task.sleep(for: delay)
        try checkLetGo()
    }

    /// Repeats `body` with backoff until it succeeds; throws ``LetGo`` when the message must be let go (after
    /// the first attempt), and rethrows an error that will never heal (the handler's
    /// ``MessageHandler/isPermanent(_:)``). For the worker's own services (the ledger, the broker), whose
    /// failures are never the player's. Each attempt is timed in `stage` and each failure counted under
    /// `operation` (`receipt_worker_failures_total`), so a loop that never ends still shows; after three
    /// failures in a row the operation makes the worker unready until it succeeds again.
    public func retrying<T: Sendable>(
        _ operation: String, stage: Histogram? = nil, _ body: @Sendable () async throws -> T
    ) async throws -> T {
        // Each attempt a span of its own when traced (a ledger round trip, a publish).
        guard let span else {
            return try await retries.retrying(operation, stage: stage, isPermanent: isPermanent, letGo: letGo, body)
        }
        return try await retries.retrying(operation, stage: stage, isPermanent: isPermanent, letGo: letGo) {
            let child = span.child(
                operation, kind: .client, attributes: [("receipt_worker.operation", .string(operation))])
            do {
                let result = try await body()
                child.end()
                return result
            } catch {
                child.fail("\(error)")
                child.end()
                throw error
            }
        }
    }
}
