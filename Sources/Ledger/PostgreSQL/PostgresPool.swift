import Dispatch
import Observability
import Synchronization

/// PostgreSQL connections, each with a thread of its own for its blocking calls, handed out one caller at
/// a time. The pool grows on demand up to its size: a replica starting while the server is at
/// `max_connections` (a scale-out at the worst moment) opens what it can and waits for the rest instead of
/// crashing. A broken connection is replaced after the call that found it broken, so the pool heals after
/// a database restart.
final class PostgresPool: Sendable {
    /// A connection and the thread its blocking calls run on.
    private struct Session: Sendable {
        var connection: PostgresConnection
        let thread: BlockingThread
    }

    private struct State {
        var idle: [Session] = []
        var opened = 0
        var waiters: [CheckedContinuation<Session?, Never>] = []
        var closed = false
    }

    private let url: String
    private let size: Int
    private let state = Mutex(State())
    /// Acquisitions that found every connection in use and waited for one.
    private let waits = Atomic<Int>(0)
    /// Statements its connections sent.
    private let roundTrips = RoundTripCount()

    /// The pool as `/metrics` shows it: its size, connections open and in use, callers waiting, waits so far.
    var stats: LedgerPoolStats {
        let waited = waits.load(ordering: .relaxed)
        return state.withLock { state in
            LedgerPoolStats(
                size: size, open: state.opened, inUse: state.opened - state.idle.count,
                waiting: state.waiters.count, waits: waited, roundTrips: roundTrips.total)
        }
    }
    private let logger: Logger

    /// Opens one connection and runs `prepare` on it (schema creation), retrying with backoff (up to 30 s
    /// apart) while the server refuses: a worker that starts before its database, or while the database is
    /// full, waits for it (unready) instead of exiting into a crash loop. A configuration the migration cannot
    /// work with (``LedgerError/Code/misconfigured``), or a migration that failed with the server answering
    /// (``LedgerError/Code/migrationFailed``), is thrown at once: waiting would not mend it. `giveUpAfter`: a
    /// command's bound (nil: a worker waits as long as it takes), past which the last failure is thrown.
    init(
        url: String, size: Int, logger: Logger, giveUpAfter: Duration? = nil,
        prepare: @escaping @Sendable (PostgresConnection) throws -> Void
    ) async throws {
        self.url = url
        self.size = max(1, size)
        self.logger = logger
        var delay = Duration.milliseconds(500)
        let deadline = giveUpAfter.map { ContinuousClock.now + $0 }
        while true {
            let thread = BlockingThread(name: "ledger-0")
            do {
                let connection = try await thread.perform { [url, roundTrips] in
                    try PostgresConnection(url: url, roundTrips: roundTrips)
                }
                try await thread.perform { try prepare(connection) }
                state.withLock {
                    $0.idle = [Session(connection: connection, thread: thread)]
                    $0.opened = 1
                }
                return
            } catch let error as LedgerError where error.code == .misconfigured || error.code == .migrationFailed {
                thread.stop()
                throw error
            } catch {
                thread.stop()
                if let deadline, ContinuousClock.now + delay > deadline {
                    throw LedgerError(
                        .unavailable, "postgresql did not answer within \(giveUpAfter ?? .zero): \(error)")
                }
                logger.warning(
                    "cannot open the ledger; retrying",
                    ["error": "\(error)", "retry_in_ms": String(delay.milliseconds)])
                try? await Task.sleep(for: delay)
                // A process told to stop while it waits for its database (SIGTERM during start-up) stops.
                try Task.checkCancellation()
                delay = min(delay * 2, .seconds(30))
            }
        }
    }

    /// Runs `body` with a connection of its own, on that connection's thread. Throws (a retriable
    /// `LedgerError`) when no connection could be opened for it.
    func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        var session = try await acquire()
        do {
            let connection = session.connection
            let result = try await session.thread.perform { try body(connection) }
            release(session)
            return result
        } catch {
            guard !session.connection.isHealthy || Self.mustReconnect(after: error) else {
                release(session)
                throw error
            }
            do {
                session.connection = try await session.thread.perform { [url, roundTrips] in
                    try PostgresConnection(url: url, roundTrips: roundTrips)
                }
                release(session)
            } catch {
                // The server refuses new connections (down, full, read-only): give the slot back, so the next
                // call opens afresh and reports why.
                giveBackSlot(of: session.thread)
            }
            throw error
        }
    }

    /// Whether `error` says the connection's server is no longer the one to talk to, though its socket is open: a
    /// standby or a primary turned read-only (25006; after a failover the old primary's connections would fail
    /// every write until the process restarted), one shutting down or not taking it now (57P01 to 57P05), a lost
    /// connection (08). A new connection asks for a primary (`target_session_attrs=read-write`): the failover's new
    /// one, or none yet.
    static func mustReconnect(after error: any Error) -> Bool {
        guard let state = (error as? LedgerError)?.sqlstate else { return false }
        return state == "25006" || state.hasPrefix("57P") || state.hasPrefix("08")
    }

    /// Frees the pool slot of a connection that failed to open or was dropped, stopping its thread. A caller
    /// waiting for a slot is woken (with nil: it decides again and may open the freed slot), never left waiting.
    private func giveBackSlot(of thread: BlockingThread) {
        thread.stop()
        let waiter = state.withLock { state in
            state.opened -= 1
            return state.waiters.isEmpty ? nil : state.waiters.removeFirst()
        }
        waiter?.resume(returning: nil)
    }

    /// Stops the idle sessions' threads (call when no caller is left).
    func close() {
        let (sessions, waiters) = state.withLock { state in
            defer {
                state.idle.removeAll()
                state.waiters.removeAll()
                state.closed = true
            }
            return (state.idle, state.waiters)
        }
        for session in sessions { session.thread.stop() }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    /// What the caller should do: use an idle session, open a new one, or wait for a release.
    private enum Next { case use(Session), open(Int), wait, closed }

    private func acquire() async throws -> Session {
        var waited = false
        while true {
            let next = state.withLock { state -> Next in
                if state.closed { return .closed }
                if let session = state.idle.popLast() { return .use(session) }
                if state.opened < size {
                    state.opened += 1
                    return .open(state.opened - 1)
                }
                return .wait
            }
            switch next {
            case .use(let session): return session
            case .closed: throw LedgerError(.closed, "the ledger is closed")
            case .open(let index):
                let thread = BlockingThread(name: "ledger-\(index)")
                do {
                    let connection = try await thread.perform { [url, roundTrips] in
                        try PostgresConnection(url: url, roundTrips: roundTrips)
                    }
                    return Session(connection: connection, thread: thread)
                } catch {
                    giveBackSlot(of: thread)
                    throw error
                }
            case .wait:
                // Woken with a session released to this caller, or with nil to decide again: a slot was given
                // back, or the pool closed. Whatever changed since the look above is seen here, under the lock
                // the waiters are woken under: a slot given back in between, to no waiter yet, is not missed. A
                // caller that waits again (another took the slot it was woken for) keeps its place at the front.
                let released = await withCheckedContinuation { continuation in
                    let now: Session?? = state.withLock { state in
                        if state.closed || state.opened < size { return .some(nil) }
                        if let session = state.idle.popLast() { return .some(session) }
                        if waited {
                            state.waiters.insert(continuation, at: 0)
                        } else {
                            state.waiters.append(continuation)
                            waits.add(1, ordering: .relaxed)
                        }
                        return nil
                    }
                    if let now { continuation.resume(returning: now) }
                }
                waited = true
                if let released { return released }
            }
        }
    }

    private func release(_ session: Session) {
        let (waiter, closed) = state.withLock { state -> (CheckedContinuation<Session?, Never>?, Bool) in
            if state.closed { return (nil, true) }
            if !state.waiters.isEmpty { return (state.waiters.removeFirst(), false) }
            state.idle.append(session)
            return (nil, false)
        }
        // A call that outlived close() (a desk request past its grace, a ping left to finish) gives back a
        // session close() never saw: stopped here, or its thread and connection would live on.
        if closed { session.thread.stop() }
        waiter?.resume(returning: session)
    }
}
