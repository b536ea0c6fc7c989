import Synchronization

/// Smart batching: requests that arrive while earlier batches are running wait, then go together in the
/// next batch (up to `maxBatch`), with at most `maxConcurrent` batches running. Under light load a request
/// goes alone and at once; under heavy load one round trip serves many, so the cost per request falls as
/// load grows instead of requests queueing for a connection.
final class Batcher<Request: Sendable, Response: Sendable>: Sendable {
    typealias Execute = @Sendable ([Request]) async throws -> [Response]

    private struct State {
        var pending: [(request: Request, continuation: CheckedContinuation<Response, any Error>)] = []
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

    func submit(_ request: Request) async throws -> Response {
        try await withCheckedThrowingContinuation { continuation in
            let batch = state.withLock { state in
                state.pending.append((request, continuation))
                return takeBatch(&state)
            }
            if let batch { run(batch) }
        }
    }

    /// The next batch to run, if a slot is free; counts it as running.
    private func takeBatch(_ state: inout State) -> [(
        request: Request, continuation: CheckedContinuation<Response, any Error>
    )]? {
        guard state.running < maxConcurrent, !state.pending.isEmpty else { return nil }
        state.running += 1
        let count = min(maxBatch, state.pending.count)
        defer { state.pending.removeFirst(count) }
        return Array(state.pending.prefix(count))
    }

    private func run(_ batch: [(request: Request, continuation: CheckedContinuation<Response, any Error>)]) {
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
