import Dispatch
import Foundation
import Synchronization

/// The ledger in PostgreSQL, shared by every replica. Unique constraints (a transaction id granted once,
/// an order granted once) make the claim safe under any number of concurrent writers: a second writer
/// of the same row waits for the first to commit, then sees its row.
public final class PostgresLedger: Ledger, Sendable {
    private struct Pool {
        var idle: [PostgresConnection] = []
        var waiters: [CheckedContinuation<PostgresConnection, Never>] = []
    }

    private let url: String
    private let pool = Mutex(Pool())
    private let queue = DispatchQueue(label: "ledger.postgresql", attributes: .concurrent)

    public init(url: String, poolSize: Int) async throws {
        self.url = url
        var connections: [PostgresConnection] = []
        for _ in 0..<max(1, poolSize) { connections.append(try await Self.blocking(queue) { try PostgresConnection(url: url) }) }
        try await Self.blocking(queue) { [connections] in try Self.createSchema(on: connections[0]) }
        pool.withLock { $0.idle = connections }
    }

    /// Creates the tables once. Replicas starting together would race on CREATE TABLE IF NOT EXISTS
    /// (PostgreSQL then fails on its catalog's unique index), so creation holds an advisory lock.
    private static func createSchema(on connection: PostgresConnection) throws {
        try connection.query("BEGIN")
        do {
            try connection.query("SELECT pg_advisory_xact_lock(7261115)")  // any constant private to this schema
            try connection.query("""
                CREATE TABLE IF NOT EXISTS grants (
                    transaction_id TEXT PRIMARY KEY,
                    order_id TEXT NOT NULL UNIQUE,
                    granted_at TIMESTAMPTZ NOT NULL DEFAULT now())
                """)
            try connection.query("""
                CREATE TABLE IF NOT EXISTS results (
                    job_id TEXT PRIMARY KEY,
                    event TEXT NOT NULL,
                    decided_at TIMESTAMPTZ NOT NULL DEFAULT now())
                """)
            try connection.query("COMMIT")
        } catch {
            _ = try? connection.query("ROLLBACK")
            throw error
        }
    }

    public func record(jobID: String, claim: LedgerClaim, event: Data) async throws -> LedgerOutcome {
        let eventText = String(decoding: event, as: UTF8.self)
        return try await withConnection { connection in
            try connection.query("BEGIN")
            do {
                let outcome = try Self.record(on: connection, jobID: jobID, claim: claim, event: eventText)
                try connection.query(outcome == .recorded ? "COMMIT" : "ROLLBACK")
                return outcome
            } catch {
                _ = try? connection.query("ROLLBACK")  // the original error is the one to report
                throw error
            }
        }
    }

    private static func record(on connection: PostgresConnection, jobID: String, claim: LedgerClaim, event: String)
        throws -> LedgerOutcome
    {
        if let stored = try connection.query("SELECT event FROM results WHERE job_id = $1", [jobID]).first, let stored {
            return .replay(Data(stored.utf8))
        }
        if case .grant(let orderID, let transactionID) = claim {
            let inserted = try connection.query(
                "INSERT INTO grants (transaction_id, order_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING 1",
                [transactionID, orderID])
            if inserted.isEmpty {
                switch try connection.query("SELECT order_id FROM grants WHERE transaction_id = $1", [transactionID]).first {
                case .some(.some(orderID)): break  // the same grant again, from another job of this order
                case .some: return .duplicateTransaction
                case .none: return .orderAlreadyFulfilled
                }
            }
        }
        let stored = try connection.query(
            "INSERT INTO results (job_id, event) VALUES ($1, $2) ON CONFLICT (job_id) DO NOTHING RETURNING 1", [jobID, event])
        if stored.isEmpty {
            // Another replica decided this job meanwhile: its answer stands.
            let winner = try connection.query("SELECT event FROM results WHERE job_id = $1", [jobID]).first ?? nil
            guard let winner else { throw LedgerError("result of job \(jobID) vanished") }
            return .replay(Data(winner.utf8))
        }
        return .recorded
    }

    public func storedEvent(jobID: String) async throws -> Data? {
        try await withConnection { connection in
            (try connection.query("SELECT event FROM results WHERE job_id = $1", [jobID]).first ?? nil).map { Data($0.utf8) }
        }
    }

    public func ping() async throws {
        _ = try await withConnection { try $0.query("SELECT 1") }
    }

    public func close() async {
        pool.withLock { $0.idle.removeAll() }
    }

    private func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        let connection = await acquire()
        do {
            let result = try await Self.blocking(queue) { try body(connection) }
            release(connection)
            return result
        } catch {
            // A broken connection is replaced, so the pool heals after a database restart.
            release(connection.isHealthy ? connection : (try? PostgresConnection(url: url)) ?? connection)
            throw error
        }
    }

    private func acquire() async -> PostgresConnection {
        await withCheckedContinuation { continuation in
            let idle: PostgresConnection? = pool.withLock { pool in
                if let connection = pool.idle.popLast() { return connection }
                pool.waiters.append(continuation)
                return nil
            }
            if let idle { continuation.resume(returning: idle) }
        }
    }

    private func release(_ connection: PostgresConnection) {
        let waiter = pool.withLock { pool -> CheckedContinuation<PostgresConnection, Never>? in
            if !pool.waiters.isEmpty { return pool.waiters.removeFirst() }
            pool.idle.append(connection)
            return nil
        }
        waiter?.resume(returning: connection)
    }

    private static func blocking<T: Sendable>(_ queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body() }) }
        }
    }
}
