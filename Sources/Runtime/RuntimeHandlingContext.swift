import Messaging
import Observability

/// The runtime's ``HandlingContext``: a message let go when the worker stops or its partition moves, the
/// services' retries counted and reported (``ServiceRetries``), each attempt a span of its own when traced.
final class RuntimeHandlingContext: HandlingContext {
    let message: InboundMessage
    let intake: Intake
    private let retries: ServiceRetries
    private let isPermanent: @Sendable (any Error) -> Bool
    private let letGo: @Sendable () -> Bool
    /// The message's `process` span when the worker traces (``RuntimeConfiguration/tracer``).
    let span: Span?

    init(
        message: InboundMessage, intake: Intake, retries: ServiceRetries,
        isPermanent: @escaping @Sendable (any Error) -> Bool,
        letGo: @escaping @Sendable () -> Bool, span: Span? = nil
    ) {
        self.message = message
        self.intake = intake
        self.retries = retries
        self.isPermanent = isPermanent
        self.letGo = letGo
        self.span = span
    }

    var mustLetGo: Bool { letGo() }

    func retrying<T: Sendable>(
        _ operation: String, stage: Histogram?, _ body: @Sendable () async throws -> T
    ) async throws -> T {
        // Each attempt a span of its own when traced (a ledger round trip, a publish).
        guard let span else {
            return try await retries.retrying(operation, stage: stage, isPermanent: isPermanent, letGo: letGo, body)
        }
        return try await retries.retrying(operation, stage: stage, isPermanent: isPermanent, letGo: letGo) {
            try await span.inChild(
                operation, kind: .client, attributes: [("receipt_worker.operation", .string(operation))], body)
        }
    }
}
