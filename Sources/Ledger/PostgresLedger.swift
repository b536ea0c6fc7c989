import Dispatch
import Foundation
import Synchronization

/// The ledger in PostgreSQL, shared by every replica. Unique constraints (a transaction id granted once,
/// an order granted once) make the claim safe under any number of concurrent writers: a second writer
/// of the same row waits for the first to commit, then sees its row.
public final class PostgresLedger: Ledger, Sendable {
    /// A connection and the thread its blocking calls run on.
    private struct Session: Sendable {
        var connection: PostgresConnection
        let thread: BlockingThread
    }

    private struct Pool {
        var idle: [Session] = []
        var waiters: [CheckedContinuation<Session, Never>] = []
    }

    private let url: String
    private let pool = Mutex(Pool())
    private let queue = DispatchQueue(label: "ledger.postgresql", attributes: .concurrent)

    public init(url: String, poolSize: Int) async throws {
        self.url = url
        var connections: [PostgresConnection] = []
        for _ in 0..<max(1, poolSize) { connections.append(try await queue.perform { try PostgresConnection(url: url) }) }
        try await queue.perform { [connections] in try Self.createSchema(on: connections[0]) }
        let sessions = connections.enumerated().map { Session(connection: $1, thread: BlockingThread(name: "ledger-\($0)")) }
        pool.withLock { $0.idle = sessions }
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
            try connection.query(Self.recordFunction)
            try connection.query("COMMIT")
        } catch {
            _ = try? connection.query("ROLLBACK")
            throw error
        }
    }

    public func record(jobID: String, claim: LedgerClaim, event: Data) async throws -> LedgerOutcome {
        let (transactionID, orderID): (String?, String?) =
            switch claim {
            case .grant(let order, let transaction): (transaction, order)
            case .deny: (nil, nil)
            }
        let parameters = [jobID, transactionID, orderID, String(decoding: event, as: UTF8.self)]
        return try await withConnection { connection in
            let row = try connection.rows("SELECT outcome, stored FROM receipt_worker_record($1, $2, $3, $4)", parameters).first
            let outcome = row?.first ?? nil
            let stored = (row?.count ?? 0) > 1 ? row?[1] ?? nil : nil
            switch outcome {
            case "recorded": return .recorded
            case "duplicate_transaction": return .duplicateTransaction
            case "order_already_fulfilled": return .orderAlreadyFulfilled
            case "replay": return .replay(Data((stored ?? "").utf8))
            default: throw LedgerError("unexpected answer from receipt_worker_record")
            }
        }
    }

    /// The claim and the decision in one round trip, one transaction. Each statement of a PL/pgSQL function
    /// takes a fresh snapshot under READ COMMITTED, so a grant committed meanwhile by another replica is seen
    /// (one SQL statement with CTEs would share a single snapshot and miss it). When another replica stored
    /// this job's decision meanwhile, the function raises: the grant it made rolls back, and the retry finds
    /// the stored answer.
    static let recordFunction = """
        CREATE OR REPLACE FUNCTION receipt_worker_record(p_job TEXT, p_transaction TEXT, p_order TEXT, p_event TEXT)
        RETURNS TABLE (outcome TEXT, stored TEXT) LANGUAGE plpgsql AS $$
        DECLARE
            v_event TEXT;
            v_owner TEXT;
        BEGIN
            SELECT event INTO v_event FROM results WHERE job_id = p_job;
            IF FOUND THEN
                RETURN QUERY SELECT 'replay'::TEXT, v_event;
                RETURN;
            END IF;
            IF p_transaction IS NOT NULL THEN
                INSERT INTO grants (transaction_id, order_id) VALUES (p_transaction, p_order) ON CONFLICT DO NOTHING;
                IF NOT FOUND THEN
                    SELECT order_id INTO v_owner FROM grants WHERE transaction_id = p_transaction;
                    IF NOT FOUND THEN
                        RETURN QUERY SELECT 'order_already_fulfilled'::TEXT, NULL::TEXT;
                        RETURN;
                    ELSIF v_owner <> p_order THEN
                        RETURN QUERY SELECT 'duplicate_transaction'::TEXT, NULL::TEXT;
                        RETURN;
                    END IF;
                END IF;
            END IF;
            INSERT INTO results (job_id, event) VALUES (p_job, p_event) ON CONFLICT (job_id) DO NOTHING;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'job % was decided concurrently', p_job;
            END IF;
            RETURN QUERY SELECT 'recorded'::TEXT, NULL::TEXT;
        END
        $$
        """

    public func storedEvent(jobID: String) async throws -> Data? {
        try await withConnection { connection in
            (try connection.query("SELECT event FROM results WHERE job_id = $1", [jobID]).first ?? nil).map { Data($0.utf8) }
        }
    }

    public func ping() async throws {
        _ = try await withConnection { try $0.query("SELECT 1") }
    }

    public func close() async {
        let sessions = pool.withLock { pool in
            defer { pool.idle.removeAll() }
            return pool.idle
        }
        for session in sessions { session.thread.stop() }
    }

    private func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        var session = await acquire()
        do {
            let connection = session.connection
            let result = try await session.thread.perform { try body(connection) }
            release(session)
            return result
        } catch {
            // A broken connection is replaced, so the pool heals after a database restart.
            if !session.connection.isHealthy, let fresh = try? PostgresConnection(url: url) { session.connection = fresh }
            release(session)
            throw error
        }
    }

    private func acquire() async -> Session {
        await withCheckedContinuation { continuation in
            let idle: Session? = pool.withLock { pool in
                if let session = pool.idle.popLast() { return session }
                pool.waiters.append(continuation)
                return nil
            }
            if let idle { continuation.resume(returning: idle) }
        }
    }

    private func release(_ session: Session) {
        let waiter = pool.withLock { pool -> CheckedContinuation<Session, Never>? in
            if !pool.waiters.isEmpty { return pool.waiters.removeFirst() }
            pool.idle.append(session)
            return nil
        }
        waiter?.resume(returning: session)
    }
}
