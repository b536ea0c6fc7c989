import Kafka
import Observability

/// What a handler may ask of the runtime while it handles one message: whether to let it go, and retries of
/// the services it depends on.
public final class HandlingContext: Sendable {
    public let message: KafkaMessage
    let generation: UInt64
    private let runtime: ConsumerRuntime
    private let handler: any MessageHandler

    init(message: KafkaMessage, generation: UInt64, runtime: ConsumerRuntime, handler: any MessageHandler) {
        self.message = message
        self.generation = generation
        self.runtime = runtime
        self.handler = handler
    }

    /// True when the message must be left for its next delivery: the worker is stopping, or its partition was
    /// released (its new owner handles the message again).
    public var mustLetGo: Bool { runtime.mustLetGo(message, generation: generation) }

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
    /// the first attempt), and rethrows an error that will never heal (the handler's ``MessageHandler/isPermanent(_:)``).
    /// For the worker's own services (the ledger, the broker), whose failures are never the player's. Each
    /// attempt is timed in `stage` and each failure counted under `operation` (`receipt_worker_failures_total`),
    /// so a loop that never ends still shows; after three failures in a row the operation makes the worker
    /// unready until it succeeds again.
    public func retrying<T: Sendable>(
        _ operation: String, stage: Histogram? = nil, _ body: @Sendable () async throws -> T
    ) async throws -> T {
        try await runtime.retrying(operation, stage: stage, isPermanent: handler.isPermanent, letGo: { self.mustLetGo }, body)
    }
}
