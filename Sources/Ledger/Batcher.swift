import Observability
import Synchronization

/// Smart batching: requests that arrive while earlier batches are running wait, then go together in the
/// next batch (up to `maxBatch`), with at most `maxConcurrent` batches running. Under light load a request
/// goes alone and at once; under heavy load one round trip serves many, so the cost per request falls as
/// load grows instead of requests queueing for a connection.
final class Batcher<Request: Sendable, Response: Sendable>: Sendable {
    typealias Execute = @Sendable ([Request]) async throws -> [Response]

    /// Unsafe continuations: each is resumed once, by the batch that took it (a checked one allocates its canary at
    /// every request, twice a job).
    private typealias Pending = (
        request: Request, continuation: UnsafeContinuation<Response, any Error>, span: Span?
    )

    private struct State {
        var pending: [Pending] = []
        var running = 0
    }

    private let state = Mutex(State())
    private let maxBatch: Int
    private let maxConcurrent: Int
    private let execute: Execute

    /// `execute` answers a batch with one response per request, in order, or throws for all of them.
    init(maxBatch: Int, maxConcurrent: Int, execute: @escaping Execute) {
        self.maxBatch = max(1, maxBatch)
        self.maxConcurrent = max(1, maxConcurrent)
        self.execute = execute
    }

    /// A traced request's span (a child of ``Span/current``) lasts from its queueing to its batch's end and says the
    /// batch's size.
    func submit(_ request: Request) async throws -> Response {
        try await Span.inCurrentChild("ledger batch", kind: .internal) {
            try await withUnsafeThrowingContinuation { continuation in
                let span = Span.current
                let batch = state.withLock { state in
                    state.pending.append((request, continuation, span))
                    return takeBatch(&state)
                }
                if let batch { run(batch) }
            }
        }
    }

    /// Requests waiting for a batch (for tests).
    var pendingCount: Int { state.withLock { $0.pending.count } }

    /// The next batch to run, if a slot is free; counts it as running.
    private func takeBatch(_ state: inout State) -> [Pending]? {
        guard state.running < maxConcurrent, !state.pending.isEmpty else { return nil }
        state.running += 1
        let count = min(maxBatch, state.pending.count)
        defer { state.pending.removeFirst(count) }
        return Array(state.pending.prefix(count))
    }

    private func run(_ batch: [Pending]) {
        for item in batch { item.span?.set("receipt_worker.ledger.batch_size", .int(Int64(batch.count))) }
        Task {
            do {
                let responses = try await execute(batch.map(\.request))
                guard responses.count == batch.count else {
                    throw LedgerError(.unavailable, "a batch of \(batch.count) got \(responses.count) answers")
                }
                for (item, response) in zip(batch, responses) { item.continuation.resume(returning: response) }
            } catch {
                for item in batch { item.continuation.resume(throwing: error) }
            }
            let next = state.withLock { state in
                state.running -= 1
                return takeBatch(&state)
            }
            if let next { run(next) }
        }
    }
}
