import Foundation
import Observability

/// The ledger in PostgreSQL, shared by every replica. Unique constraints (a transaction id granted once,
/// an order granted once) make the claim safe under any number of concurrent writers: a second writer
/// of the same row waits for the first to commit, then sees its row.
public final class PostgresLedger: Ledger, Sendable {
    private let pool: PostgresPool
    /// Lookups and records go in batches, one round trip and one transaction each (see ``Batcher``).
    private let lookups: Batcher<String, Data?>
    private let records: Batcher<RecordRequest, RecordAnswer>

    struct RecordRequest: Sendable {
        let jobID: String
        let transactionID: String?
        let orderID: String?
        let purchaseID: String?
        let event: String
    }

    /// One item's answer from a batch.
    enum RecordAnswer: Sendable {
        case outcome(LedgerOutcome)
        /// Met a concurrent decision, a deadlock or a unique violation: retried alone.
        case conflict
        /// Failed with this SQLSTATE and message (a read-only server, a value the server refuses).
        case failed(LedgerError)
    }

    public init(url: String, poolSize: Int) async throws {
        let pool = await PostgresPool(
            url: url, size: poolSize, logger: Logger(label: "ledger"), prepare: Self.createSchema)
        self.pool = pool
        // Half the connections each, so a burst of one kind never starves the other.
        let concurrent = max(1, poolSize / 2)
        lookups = Batcher(maxBatch: 256, maxConcurrent: concurrent) { jobIDs in
            try await pool.withConnection { try Self.storedEvents(jobIDs, on: $0) }
        }
        records = Batcher(maxBatch: 256, maxConcurrent: concurrent) { requests in
            try await pool.withConnection { try Self.record(requests, on: $0) }
        }
    }

    /// Creates the tables once. Replicas starting together would race on CREATE TABLE IF NOT EXISTS
    /// (PostgreSQL then fails on its catalog's unique index), so creation holds an advisory lock.
    private static func createSchema(on connection: PostgresConnection) throws {
        try connection.query("BEGIN")
        do {
            try connection.query("SELECT pg_advisory_xact_lock(7261115)")  // any constant private to this schema
            try connection.query(
                """
                CREATE TABLE IF NOT EXISTS grants (
                    transaction_id TEXT PRIMARY KEY,
                    order_id TEXT NOT NULL UNIQUE,
                    granted_at TIMESTAMPTZ NOT NULL DEFAULT now())
                """)
            try connection.query(
                """
                CREATE TABLE IF NOT EXISTS results (
                    job_id TEXT PRIMARY KEY,
                    event TEXT NOT NULL,
                    decided_at TIMESTAMPTZ NOT NULL DEFAULT now())
                """)
            // Version 2: the purchase identity (a restore's new transaction id is the same purchase). Existing
            // grants get their transaction id, which is the identity of a consumable and of a first purchase.
            try connection.query("ALTER TABLE grants ADD COLUMN IF NOT EXISTS purchase_id TEXT")
            try connection.query("UPDATE grants SET purchase_id = transaction_id WHERE purchase_id IS NULL")
            try connection.query("CREATE UNIQUE INDEX IF NOT EXISTS grants_purchase_id ON grants (purchase_id)")
            // Replicas of the previous release (during a rolling update) insert grants without purchase_id:
            // give them their transaction id, as the migration did, or a restore would not meet them.
            try connection.query(
                """
                CREATE OR REPLACE FUNCTION receipt_worker_fill_purchase_id() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    NEW.purchase_id := coalesce(NEW.purchase_id, NEW.transaction_id);
                    RETURN NEW;
                END
                $$
                """)
            try connection.query("DROP TRIGGER IF EXISTS grants_fill_purchase_id ON grants")
            try connection.query(
                """
                CREATE TRIGGER grants_fill_purchase_id BEFORE INSERT ON grants
                    FOR EACH ROW EXECUTE FUNCTION receipt_worker_fill_purchase_id()
                """)
            // The functions of version 1 stay for replicas of the previous release during a rolling update.
            try connection.query(Self.recordFunction)
            try connection.query(Self.recordBatchFunction)
            try connection.query("COMMIT")
        } catch {
            _ = try? connection.query("ROLLBACK")
            throw error
        }
    }

    /// The claim and the decision in one round trip, one transaction. Each statement of a PL/pgSQL function
    /// takes a fresh snapshot under READ COMMITTED, so a grant committed meanwhile by another replica is seen
    /// (one SQL statement with CTEs would share a single snapshot and miss it). When another replica stored
    /// this job's decision meanwhile, the function raises: the grant it made rolls back, and the retry finds
    /// the stored answer.
    static let recordFunction = """
        CREATE OR REPLACE FUNCTION receipt_worker_record_v2(p_job TEXT, p_transaction TEXT, p_order TEXT, p_purchase TEXT, p_event TEXT)
        RETURNS TABLE (outcome TEXT, stored TEXT) LANGUAGE plpgsql AS $$
        DECLARE
            v_event TEXT;
            v_owner TEXT;
            v_transaction TEXT;
        BEGIN
            SELECT event INTO v_event FROM results WHERE job_id = p_job;
            IF FOUND THEN
                RETURN QUERY SELECT 'replay'::TEXT, v_event;
                RETURN;
            END IF;
            IF p_transaction IS NOT NULL THEN
                INSERT INTO grants (transaction_id, order_id, purchase_id)
                    VALUES (p_transaction, p_order, coalesce(p_purchase, p_transaction)) ON CONFLICT DO NOTHING;
                IF NOT FOUND THEN
                    -- Another order's grant of this transaction or purchase first, if there is one.
                    SELECT order_id, transaction_id INTO v_owner, v_transaction FROM grants
                        WHERE transaction_id = p_transaction OR purchase_id = coalesce(p_purchase, p_transaction)
                            OR transaction_id = coalesce(p_purchase, p_transaction)
                        ORDER BY order_id = p_order LIMIT 1;
                    IF FOUND AND v_owner <> p_order THEN
                        RETURN QUERY SELECT 'duplicate_transaction'::TEXT, NULL::TEXT;
                        RETURN;
                    ELSIF NOT FOUND OR v_transaction <> p_transaction THEN
                        RETURN QUERY SELECT 'order_already_fulfilled'::TEXT, NULL::TEXT;
                        RETURN;
                    END IF;
                END IF;
            END IF;
            INSERT INTO results (job_id, event) VALUES (p_job, p_event) ON CONFLICT (job_id) DO NOTHING;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'job % was decided concurrently', p_job USING ERRCODE = 'RW001';
            END IF;
            RETURN QUERY SELECT 'recorded'::TEXT, NULL::TEXT;
        END
        $$
        """

    public func record(jobID: String, claim: LedgerClaim, event: Data) async throws -> LedgerOutcome {
        let (transactionID, orderID, purchaseID): (String?, String?, String?) =
            switch claim {
            case .grant(let order, let transaction, let purchase): (transaction, order, purchase)
            case .deny: (nil, nil, nil)
            }
        let request = RecordRequest(
            jobID: jobID, transactionID: transactionID, orderID: orderID, purchaseID: purchaseID,
            event: String(decoding: event, as: UTF8.self))
        switch try await records.submit(request) {
        case .outcome(let outcome): return outcome
        case .conflict:
            // Decided meanwhile by another replica (or another batch): the retry finds the stored answer.
            throw LedgerError("job \(jobID) was decided concurrently; retrying")
        case .failed(let error): throw error
        }
    }

    public func storedEvent(jobID: String) async throws -> Data? {
        try await lookups.submit(jobID)
    }

    public func ping() async throws {
        // Writable, not merely reachable: a failover replica answers SELECT 1 but refuses every decision.
        let readOnly = try await pool.withConnection {
            try $0.query("SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'")
        }
        if readOnly.first == "t" { throw LedgerError("postgresql: the server is read-only (a standby?)") }
    }

    public func close() async {
        pool.close()
    }

    /// One query for many jobs' stored events.
    static func storedEvents(_ jobIDs: [String], on connection: PostgresConnection) throws -> [Data?] {
        let rows = try connection.rows(
            "SELECT job_id, event FROM results WHERE job_id = ANY($1::text[])", [PostgresArray.literal(jobIDs)])
        var found: [String: Data] = [:]
        for row in rows where row.count == 2 {
            if let id = row[0], let event = row[1] { found[id] = Data(event.utf8) }
        }
        return jobIDs.map { found[$0] }
    }

    /// One call of `receipt_worker_record_batch` for many decisions. Grants are sent in transaction-id
    /// order, so two batches claiming the same transactions lock them in the same order. Nil for an item
    /// that met a concurrent decision (to be retried alone).
    static func record(_ requests: [RecordRequest], on connection: PostgresConnection) throws -> [RecordAnswer] {
        let order = requests.indices.sorted { (requests[$0].transactionID ?? "") < (requests[$1].transactionID ?? "") }
        let sorted = order.map { requests[$0] }
        let rows = try connection.rows(
            """
            SELECT outcome, stored FROM receipt_worker_record_batch_v2($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
            """,
            [
                PostgresArray.literal(sorted.map(\.jobID)), PostgresArray.literal(sorted.map(\.transactionID)),
                PostgresArray.literal(sorted.map(\.orderID)), PostgresArray.literal(sorted.map(\.purchaseID)),
                PostgresArray.literal(sorted.map(\.event)),
            ])
        guard rows.count == requests.count else {
            throw LedgerError("receipt_worker_record_batch_v2 answered \(rows.count) of \(requests.count)")
        }
        var answers = [RecordAnswer](repeating: .conflict, count: requests.count)
        for (position, row) in zip(order, rows) {
            let stored = row.count > 1 ? row[1] : nil
            switch row.first ?? nil {
            case "recorded": answers[position] = .outcome(.recorded)
            case "duplicate_transaction": answers[position] = .outcome(.duplicateTransaction)
            case "order_already_fulfilled": answers[position] = .outcome(.orderAlreadyFulfilled)
            case "replay": answers[position] = .outcome(.replay(Data((stored ?? "").utf8)))
            case "conflict": answers[position] = .conflict
            case "error":
                // "SQLSTATE message": a data exception (22) or a program limit (54, an index row too large)
                // will fail the same way forever; anything else (read-only, out of disk) may heal.
                let text = stored ?? ""
                answers[position] = .failed(
                    LedgerError("postgresql: \(text)", isPermanent: text.hasPrefix("22") || text.hasPrefix("54")))
            default: throw LedgerError("unexpected answer from receipt_worker_record_batch_v2")
            }
        }
        return answers
    }

    /// The batch form of `receipt_worker_record_v2`: one row per item, in order. Each item runs in a
    /// subtransaction, so an item that meets a concurrent decision (or a deadlock with another batch) rolls
    /// back alone and answers `conflict`, to be retried; the others are kept. Any other failure answers
    /// `error` with its SQLSTATE: it is not a race, and must not be retried as one.
    static let recordBatchFunction = """
        CREATE OR REPLACE FUNCTION receipt_worker_record_batch_v2(p_jobs TEXT[], p_transactions TEXT[], p_orders TEXT[], p_purchases TEXT[], p_events TEXT[])
        RETURNS TABLE (outcome TEXT, stored TEXT) LANGUAGE plpgsql AS $$
        BEGIN
            FOR i IN 1 .. coalesce(array_length(p_jobs, 1), 0) LOOP
                BEGIN
                    RETURN QUERY SELECT r.outcome, r.stored
                        FROM receipt_worker_record_v2(p_jobs[i], p_transactions[i], p_orders[i], p_purchases[i], p_events[i]) AS r;
                EXCEPTION
                    WHEN unique_violation OR deadlock_detected OR serialization_failure OR SQLSTATE 'RW001' THEN
                        RETURN QUERY SELECT 'conflict'::TEXT, NULL::TEXT;
                    WHEN OTHERS THEN
                        RETURN QUERY SELECT 'error'::TEXT, SQLSTATE || ' ' || SQLERRM;
                END;
            END LOOP;
        END
        $$
        """
}
