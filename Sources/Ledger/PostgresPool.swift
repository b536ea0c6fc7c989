import Dispatch
import Synchronization

/// PostgreSQL connections, each with a thread of its own for its blocking calls, handed out one caller at
/// a time. A broken connection is replaced after the call that found it broken, so the pool heals after a
/// database restart.
final class PostgresPool: Sendable {
    /// A connection and the thread its blocking calls run on.
    private struct Session: Sendable {
        var connection: PostgresConnection
        let thread: BlockingThread
    }

    private struct State {
        var idle: [Session] = []
        var waiters: [CheckedContinuation<Session, Never>] = []
    }

    private let url: String
    private let state = Mutex(State())

    /// Opens `size` connections and runs `prepare` on the first (schema creation) before any is handed out.
    init(url: String, size: Int, prepare: @escaping @Sendable (PostgresConnection) throws -> Void) async throws {
        self.url = url
        var sessions: [Session] = []
        for index in 0..<max(1, size) {
            let thread = BlockingThread(name: "ledger-\(index)")
            do {
                let connection = try await thread.perform { try PostgresConnection(url: url) }
                sessions.append(Session(connection: connection, thread: thread))
            } catch {
                thread.stop()
                for session in sessions { session.thread.stop() }
                throw error
            }
        }
        let first = sessions[0].connection
        try await sessions[0].thread.perform { try prepare(first) }
        state.withLock { $0.idle = sessions }
    }

    /// Runs `body` with a connection of its own, on that connection's thread.
    func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        var session = await acquire()
        do {
            let connection = session.connection
            let result = try await session.thread.perform { try body(connection) }
            release(session)
            return result
        } catch {
            if !session.connection.isHealthy,
                let fresh = try? await session.thread.perform({ [url] in try PostgresConnection(url: url) })
            {
                session.connection = fresh
            }
            release(session)
            throw error
        }
    }

    /// Stops the idle sessions' threads (call when no caller is left).
    func close() {
        let sessions = state.withLock { state in
            defer { state.idle.removeAll() }
            return state.idle
        }
        for session in sessions { session.thread.stop() }
    }

    private func acquire() async -> Session {
        await withCheckedContinuation { continuation in
            let idle: Session? = state.withLock { state in
                if let session = state.idle.popLast() { return session }
                state.waiters.append(continuation)
                return nil
            }
            if let idle { continuation.resume(returning: idle) }
        }
    }

    private func release(_ session: Session) {
        let waiter = state.withLock { state -> CheckedContinuation<Session, Never>? in
            if !state.waiters.isEmpty { return state.waiters.removeFirst() }
            state.idle.append(session)
            return nil
        }
        waiter?.resume(returning: session)
    }
}
