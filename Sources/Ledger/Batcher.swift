import Observability
import Synchronization

/// Smart batching: requests that arrive while earlier batches are running wait, then go together in the
/// next batch (up to `maxBatch`), with at most `maxConcurrent` batches running. Under light load a request
/// goes alone and at once; under heavy load one round trip serves many, so the cost per request falls as
/// load grows instead of requests queueing for a connection.
///
/// With `gather` set, a request that finds a slot free while batches are coming fast (the last ended less than
/// `gather` ago) waits that long for others before its batch starts: without it a busy writer's batches stay as small
/// as its idle moments are short. Under light load nothing waits.
final class Batcher<Request: Sendable, Response: Sendable>: Sendable {
    typealias Execute = @Sendable ([Request]) async throws -> [Response]

    /// Unsafe continuations: each is resumed once, by the batch that took it (a checked one allocates its canary at
    /// every request, twice a job).
    private typealias Waiter = (continuation: UnsafeContinuation<Response, any Error>, span: Span?)

    /// The requests waiting, and beside them, index for index, who waits for each: a batch that takes them all
    /// takes both arrays whole, so a request (a decision is a few dozen references) is never copied on its way.
    private struct Batch {
        var requests: [Request] = []
        var waiters: [Waiter] = []
    }

    private struct State {
        var pending = Batch()
        var running = 0
        /// When the last batch ended (nil: none yet).
        var lastEnded: ContinuousClock.Instant?
        /// A slot is gathering: what arrives meanwhile goes with it, not in a batch of its own.
        var gathering = false
    }

    /// What a request's arrival starts.
    private enum Start {
        case nothing
        case batch(Batch)
        /// A slot taken: the batch is taken when the gathering ends.
        case gathering
    }

    private let state = Mutex(State())
    private let maxBatch: Int
    private let maxConcurrent: Int
    private let gather: Duration
    private let waitGathering: @Sendable (Duration) async -> Void
    private let execute: Execute

    /// `execute` answers a batch with one response per request, in order, or throws for all of them.
    /// `waitGathering` is how a gathering waits: a sleep, or a test's own signal.
    init(
        maxBatch: Int, maxConcurrent: Int, gather: Duration = .zero,
        waitGathering: @escaping @Sendable (Duration) async -> Void = { try? await Task.sleep(for: $0) },
        execute: @escaping Execute
    ) {
        self.maxBatch = max(1, maxBatch)
        self.maxConcurrent = max(1, maxConcurrent)
        self.gather = max(.zero, gather)
        self.waitGathering = waitGathering
        self.execute = execute
    }

    /// A traced request's span (a child of ``Span/current``) lasts from its queueing to its batch's end and says the
    /// batch's size.
    func submit(_ request: Request) async throws -> Response {
        try await Span.inCurrentChild("ledger batch", kind: .internal) {
            try await withUnsafeThrowingContinuation { continuation in
                let span = Span.current
                let start = state.withLock { state in
                    state.pending.requests.append(request)
                    state.pending.waiters.append((continuation, span))
                    return arrived(&state)
                }
                switch start {
                case .nothing: break
                case .batch(let batch): run(batch)
                case .gathering: runAfterGathering()
                }
            }
        }
    }

    /// Requests waiting for a batch (for tests).
    var pendingCount: Int { state.withLock { $0.pending.requests.count } }

    /// What a request just queued starts: its batch at once, or a gathering while batches are coming fast (only
    /// the first request of a batch to come reads the clock).
    private func arrived(_ state: inout State) -> Start {
        guard !state.gathering else { return .nothing }
        guard gather > .zero, state.pending.requests.count == 1, state.running < maxConcurrent,
            let lastEnded = state.lastEnded, ContinuousClock.now - lastEnded < gather
        else { return takeBatch(&state).map(Start.batch) ?? .nothing }
        state.running += 1
        state.gathering = true
        return .gathering
    }

    /// A gathering's end: its slot, counted as running, takes what has come.
    private func runAfterGathering() {
        let gather = self.gather
        Task {
            await waitGathering(gather)
            let batch = state.withLock { state in
                state.running -= 1
                state.gathering = false
                return takeBatch(&state)
            }
            if let batch { run(batch) }
        }
    }

    /// The next batch to run, if a slot is free; counts it as running.
    private func takeBatch(_ state: inout State) -> Batch? {
        guard state.running < maxConcurrent, !state.pending.requests.isEmpty else { return nil }
        state.running += 1
        let count = min(maxBatch, state.pending.requests.count)
        guard count < state.pending.requests.count else {
            defer { state.pending = Batch() }
            return state.pending
        }
        defer {
            state.pending.requests.removeFirst(count)
            state.pending.waiters.removeFirst(count)
        }
        return Batch(
            requests: Array(state.pending.requests.prefix(count)), waiters: Array(state.pending.waiters.prefix(count)))
    }

    private func run(_ batch: Batch) {
        let waiters = batch.waiters
        for waiter in waiters { waiter.span?.set("receipt_worker.ledger.batch_size", .int(Int64(waiters.count))) }
        Task {
            let answered: Result<[Response], any Error>
            do {
                let responses = try await execute(batch.requests)
                guard responses.count == waiters.count else {
                    throw LedgerError(.unavailable, "a batch of \(waiters.count) got \(responses.count) answers")
                }
                answered = .success(responses)
            } catch {
                answered = .failure(error)
            }
            // The slot is freed and the batch's end noted before its waiters resume: a request sent the moment its
            // answer came back finds both, and its gathering does not depend on which thread runs first.
            let next = state.withLock { state in
                state.running -= 1
                if gather > .zero { state.lastEnded = .now }
                return takeBatch(&state)
            }
            if let next { run(next) }
            switch answered {
            case .success(let responses):
                for (waiter, response) in zip(waiters, responses) { waiter.continuation.resume(returning: response) }
            case .failure(let error):
                for waiter in waiters { waiter.continuation.resume(throwing: error) }
            }
        }
    }
}
