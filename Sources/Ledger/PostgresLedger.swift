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

    private let schema: PostgresSchema

    public init(url: String, poolSize: Int, schema: PostgresSchema) async throws {
        let logger = Logger(label: "ledger")
        let pool = await PostgresPool(url: url, size: poolSize, logger: logger) { connection in
            for migration in try schema.migrate(on: connection) {
                logger.notice(
                    "ledger schema migrated",
                    ["schema": schema.name, "version": String(migration.version), "migration": migration.description])
            }
        }
        self.pool = pool
        self.schema = schema
        // Half the connections each, so a burst of one kind never starves the other.
        let concurrent = max(1, poolSize / 2)
        lookups = Batcher(maxBatch: 256, maxConcurrent: concurrent) { jobIDs in
            try await pool.withConnection { try Self.storedEvents(jobIDs, schema: schema, on: $0) }
        }
        records = Batcher(maxBatch: 256, maxConcurrent: concurrent) { requests in
            try await pool.withConnection { try Self.record(requests, schema: schema, on: $0) }
        }
    }

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

    public func grant(purchaseID: String?, transactionID: String) async throws -> GrantRecord? {
        let name = schema.name
        let rows = try await pool.withConnection { connection in
            try connection.rows(
                """
                SELECT g.order_id, g.transaction_id, g.event, (g.revoked_at IS NOT NULL)::text,
                    (SELECT extract(epoch FROM c.respond_by)::text FROM \(name).consumption_requests c
                        WHERE c.transaction_id = $2)
                FROM \(name).grants g
                WHERE g.transaction_id = $2 OR g.purchase_id = $2 OR g.purchase_id = coalesce($1, $2)
                ORDER BY g.transaction_id = $2 DESC LIMIT 1
                """, [purchaseID, transactionID])
        }
        guard let row = rows.first, row.count == 5, let order = row[0], let transaction = row[1] else { return nil }
        return GrantRecord(
            orderID: order, transactionID: transaction, event: row[2].map { Data($0.utf8) }, revoked: row[3] == "true",
            consumptionRespondBy: row[4].flatMap(Double.init).map { Date(timeIntervalSince1970: $0) })
    }

    public func storedNotification(id: String) async throws -> Data?? {
        let name = schema.name
        let rows = try await pool.withConnection { connection in
            try connection.rows("SELECT event FROM \(name).notifications WHERE notification_id = $1", [id])
        }
        guard let row = rows.first else { return nil }
        return .some(row.first.flatMap { $0 }.map { Data($0.utf8) })
    }

    public func recordNotification(id: String, change: PurchaseChange, event: Data?, grantedOrder: String?)
        async throws -> NotificationRecord
    {
        let name = schema.name
        return try await pool.withConnection { connection in
            try connection.query("BEGIN")
            do {
                let inserted = try connection.rows(
                    """
                    INSERT INTO \(name).notifications (notification_id) VALUES ($1)
                        ON CONFLICT (notification_id) DO NOTHING RETURNING 1
                    """, [id])
                guard !inserted.isEmpty else {
                    let stored = try connection.rows(
                        "SELECT event FROM \(name).notifications WHERE notification_id = $1", [id])
                    try connection.query("COMMIT")
                    return .replay(stored.first?.first.flatMap { $0 }.map { Data($0.utf8) })
                }
                var published = event
                switch change {
                case .none: break
                case .revoke(let purchase, let transaction, let at), .reinstate(let purchase, let transaction, let at):
                    let revoke = if case .revoke = change { true } else { false }
                    // The same lock as the grant's record: the two never interleave.
                    try connection.query("SELECT pg_advisory_xact_lock(hashtext($1))", [purchase])
                    let last = try connection.rows(
                        """
                        SELECT revoked::text, extract(epoch FROM changed_at)::text FROM \(name).purchase_states
                            WHERE purchase_id = $1 FOR UPDATE
                        """, [purchase]
                    ).first.flatMap { row -> (revoked: Bool, at: Date)? in
                        guard row.count == 2, let seconds = row[1].flatMap(Double.init) else { return nil }
                        return (row[0] == "true", Date(timeIntervalSince1970: seconds))
                    }
                    let outcome = PurchaseStateRule.outcome(revoke: revoke, at: at, last: last)
                    if !outcome.changes { published = nil }
                    if outcome.applies {
                        try connection.rows(
                            """
                            INSERT INTO \(name).purchase_states (purchase_id, transaction_id, revoked, changed_at)
                                VALUES ($1, $2, $3::boolean, to_timestamp($4::double precision))
                                ON CONFLICT (purchase_id) DO UPDATE SET transaction_id = EXCLUDED.transaction_id,
                                    revoked = EXCLUDED.revoked, changed_at = EXCLUDED.changed_at
                            """, [purchase, transaction, String(revoke), String(at.timeIntervalSince1970)])
                        let orders = try connection.query(
                            """
                            UPDATE \(name).grants SET revoked_at = \(revoke ? "coalesce(revoked_at, now())" : "NULL")
                                WHERE purchase_id = $1 OR transaction_id = $2 OR purchase_id = $2 RETURNING order_id
                            """, [purchase, transaction]
                        ).compactMap { $0 }
                        if grantedOrder.map({ !orders.contains($0) }) ?? !orders.isEmpty { throw GrantChanged() }
                    }
                case .consumptionRequest(let transaction, let respondBy):
                    // A request delivered late (a backfill) never moves a newer one's deadline back.
                    try connection.rows(
                        """
                        INSERT INTO \(name).consumption_requests (transaction_id, notification_id, respond_by, requested_at)
                            VALUES ($1, $2, to_timestamp($3::double precision), to_timestamp($3::double precision) - interval '12 hours')
                            ON CONFLICT (transaction_id) DO UPDATE SET notification_id = EXCLUDED.notification_id,
                                respond_by = EXCLUDED.respond_by, requested_at = EXCLUDED.requested_at, answered_at = NULL
                                WHERE \(name).consumption_requests.respond_by < EXCLUDED.respond_by
                        """, [transaction, id, String(respondBy.timeIntervalSince1970)])
                }
                if let published {
                    try connection.rows(
                        "UPDATE \(name).notifications SET event = $2 WHERE notification_id = $1",
                        [id, String(decoding: published, as: UTF8.self)])
                }
                try connection.query("COMMIT")
                return .recorded(published)
            } catch {
                _ = try? connection.query("ROLLBACK")
                throw error
            }
        }
    }

    public func answerConsumptionRequest(transactionID: String) async throws {
        let name = schema.name
        _ = try await pool.withConnection { connection in
            try connection.rows(
                "UPDATE \(name).consumption_requests SET answered_at = now() WHERE transaction_id = $1",
                [transactionID])
        }
    }

    public func oldestOpenConsumptionRequest() async throws -> Date? {
        let name = schema.name
        let rows = try await pool.withConnection { connection in
            try connection.query(
                """
                SELECT extract(epoch FROM min(requested_at))::text FROM \(name).consumption_requests
                    WHERE answered_at IS NULL AND respond_by > now() - interval '12 hours'
                """)
        }
        return rows.first.flatMap { $0 }.flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
    }

    /// Deletes stored results decided before `cutoff`, 10,000 rows a transaction (short locks, a bounded
    /// WAL burst). Under a try-lock: with many replicas pruning on a timer, one does the work at a time and
    /// the others return 0 at once.
    public func pruneResults(decidedBefore cutoff: Date) async throws -> Int {
        let name = schema.name
        let since = Timestamp.rfc3339(cutoff)
        var total = 0
        while true {
            let deleted = try await pool.withConnection { connection -> Int? in
                try connection.query("BEGIN")
                do {
                    guard
                        try connection.query("SELECT pg_try_advisory_xact_lock(\(PostgresSchema.pruneLock))").first
                            == "t"
                    else {
                        try connection.query("ROLLBACK")
                        return nil
                    }
                    let rows = try connection.query(
                        """
                        WITH doomed AS (SELECT job_id FROM \(name).results WHERE decided_at < $1::timestamptz LIMIT 10000)
                        DELETE FROM \(name).results r USING doomed WHERE r.job_id = doomed.job_id RETURNING 1
                        """, [since])
                    try connection.query("COMMIT")
                    return rows.count
                } catch {
                    _ = try? connection.query("ROLLBACK")
                    throw error
                }
            }
            guard let deleted else { return total }
            total += deleted
            if deleted < 10_000 { return total }
        }
    }

    /// Applies the schema's missing migrations without opening a ledger (`receipt-worker ledger migrate`).
    public static func migrate(url: String, schema: PostgresSchema) async throws -> [PostgresSchema.Migration] {
        let thread = BlockingThread(name: "ledger-migrate")
        defer { thread.stop() }
        return try await thread.perform {
            let connection = try PostgresConnection(url: url)
            return try schema.migrate(on: connection)
        }
    }

    /// One query for many jobs' stored events.
    static func storedEvents(_ jobIDs: [String], schema: PostgresSchema, on connection: PostgresConnection) throws
        -> [Data?]
    {
        let rows = try connection.rows(
            "SELECT job_id, event FROM \(schema.name).results WHERE job_id = ANY($1::text[])",
            [PostgresArray.literal(jobIDs)])
        var found: [String: Data] = [:]
        for row in rows where row.count == 2 {
            if let id = row[0], let event = row[1] { found[id] = Data(event.utf8) }
        }
        return jobIDs.map { found[$0] }
    }

    /// One call of `record_batch_v2` for many decisions. Grants are sent in transaction-id
    /// order, so two batches claiming the same transactions lock them in the same order. Nil for an item
    /// that met a concurrent decision (to be retried alone).
    static func record(_ requests: [RecordRequest], schema: PostgresSchema, on connection: PostgresConnection) throws
        -> [RecordAnswer]
    {
        let order = requests.indices.sorted { (requests[$0].transactionID ?? "") < (requests[$1].transactionID ?? "") }
        let sorted = order.map { requests[$0] }
        let rows = try connection.rows(
            """
            SELECT outcome, stored FROM \(schema.name).record_batch_v2($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
            """,
            [
                PostgresArray.literal(sorted.map(\.jobID)), PostgresArray.literal(sorted.map(\.transactionID)),
                PostgresArray.literal(sorted.map(\.orderID)), PostgresArray.literal(sorted.map(\.purchaseID)),
                PostgresArray.literal(sorted.map(\.event)),
            ])
        guard rows.count == requests.count else {
            throw LedgerError("record_batch_v2 answered \(rows.count) of \(requests.count)")
        }
        var answers = [RecordAnswer](repeating: .conflict, count: requests.count)
        for (position, row) in zip(order, rows) {
            let stored = row.count > 1 ? row[1] : nil
            switch row.first ?? nil {
            case "recorded": answers[position] = .outcome(.recorded)
            case "duplicate_transaction": answers[position] = .outcome(.duplicateTransaction)
            case "order_already_fulfilled": answers[position] = .outcome(.orderAlreadyFulfilled)
            case "revoked": answers[position] = .outcome(.revoked)
            case "replay": answers[position] = .outcome(.replay(Data((stored ?? "").utf8)))
            case "conflict": answers[position] = .conflict
            case "error":
                // "SQLSTATE message": a data exception (22) or a program limit (54, an index row too large)
                // will fail the same way forever; anything else (read-only, out of disk) may heal.
                let text = stored ?? ""
                answers[position] = .failed(
                    LedgerError("postgresql: \(text)", isPermanent: text.hasPrefix("22") || text.hasPrefix("54")))
            default: throw LedgerError("unexpected answer from record_batch_v2")
            }
        }
        return answers
    }
}
