import Foundation
import Observability
import Vocabulary

/// The ledger in PostgreSQL, shared by every replica. Unique constraints (a purchase granted once in its app
/// and environment, an order granted once in its app) make the claim safe under any number of concurrent
/// writers: a second writer of the same row waits for the first to commit, then sees its row.
public final class PostgresLedger: Ledger, Sendable {
    let pool: PostgresPool
    public var poolStats: LedgerPoolStats? { pool.stats }
    /// Lookups and records go in batches, one round trip and one transaction each (see ``Batcher``).
    private let lookups: Batcher<DecisionKey, StoredEvent?>
    private let records: Batcher<Decision, RecordAnswer>
    let schema: PostgresSchema

    /// One item's answer from a batch.
    enum RecordAnswer: Sendable {
        case outcome(LedgerOutcome)
        /// Met a concurrent decision, a deadlock or a unique violation: retried.
        case conflict
        /// Failed for good: a value the server refuses.
        case failed(LedgerError)
    }

    /// `migrate`: apply missing migrations at start-up (`ledger.migrate_on_start`); without it a schema that
    /// lacks some is waited for, saying what to run, until a migration Job (or `ledger migrate`) applies them.
    /// `giveUpAfter`: a command's bound on opening (nil: a worker waits for its database as long as it takes).
    public init(
        url: String, poolSize: Int, schema: PostgresSchema, migrate: Bool = true, giveUpAfter: Duration? = nil
    ) async throws {
        let logger = Logger(label: "ledger")
        let pool = try await PostgresPool(url: url, size: poolSize, logger: logger, giveUpAfter: giveUpAfter) {
            connection in
            if migrate {
                _ = try schema.migrate(on: connection, logger: logger)
                return
            }
            let pending = try schema.pending(on: connection)
            guard pending.isEmpty else {
                throw LedgerError(
                    .notMigrated,
                    "schema \(schema.name) lacks migration(s) \(pending.map { String($0.version) }.joined(separator: ", "))"
                        + " that this release needs, and ledger.migrate_on_start is false: run `receipt-worker ledger"
                        + " migrate` (in Kubernetes, the migration Job: deploy/kubernetes/migrate-job.yaml)")
            }
            try schema.checkDefaultApp(on: connection)
        }
        self.pool = pool
        self.schema = schema
        // At most two batches of each kind at once, on half the connections each (a burst of one kind never
        // starves the other): under load the batches grow instead of multiplying. Measured on one 2-core
        // machine, 20,000 jobs: eight record batches at once cost 248 µs of PostgreSQL and 0.066 transaction ids
        // per job, two cost 138 µs and 0.024 (docs/benchmarks.md, "The ledger as it grows").
        let concurrent = min(max(1, poolSize / 2), 2)
        lookups = Batcher(maxBatch: 256, maxConcurrent: concurrent) { keys in
            try await pool.withConnection { try Self.storedDecisions(keys, schema: schema.name, on: $0) }
        }
        records = Batcher(maxBatch: 256, maxConcurrent: concurrent) { decisions in
            try await pool.withConnection { try Self.record(decisions, schema: schema, on: $0) }
        }
    }

    // MARK: Decisions

    public func storedDecision(_ key: DecisionKey) async throws -> StoredEvent? {
        try await lookups.submit(key)
    }

    public func record(_ decision: Decision) async throws -> LedgerOutcome {
        switch try await records.submit(decision) {
        case .outcome(let outcome): return outcome
        case .conflict:
            // Decided meanwhile by another replica (or another batch): the retry finds the stored answer.
            throw LedgerError(.conflict, "job \(decision.key.jobID) was decided concurrently; retrying")
        case .failed(let error): throw error
        }
    }

    /// One query for many jobs' stored events (a result stored before fingerprints answers any of its job's).
    static func storedDecisions(_ keys: [DecisionKey], schema: String, on connection: PostgresConnection)
        throws -> [StoredEvent?]
    {
        let rows = try connection.rows(
            "SELECT * FROM \(schema).stored_results($1::text[], $2::text[])",
            [PostgresArray.literal(keys.map(\.app.rawValue)), PostgresArray.literal(keys.map(\.jobID))])
        var found: [DecisionKey: StoredEvent] = [:]
        var legacy: [String: StoredEvent] = [:]
        for row in rows where row.count == 8 {
            guard let app = row[0], let job = row[1], let fingerprint = row[2] else { continue }
            let event = StoredEvent(
                eventID: row[3] ?? "", type: row[4] ?? "", time: row[5] ?? "", key: row[6] ?? "",
                json: Array((row[7] ?? "").utf8))
            if fingerprint.isEmpty {
                legacy[app + "\u{0}" + job] = event
            } else {
                found[DecisionKey(app: AppScope(app), jobID: job, fingerprint: fingerprint)] = event
            }
        }
        return keys.map { key in
            guard var stored = found[key] ?? legacy[key.app.rawValue + "\u{0}" + key.jobID] else { return nil }
            if let followUp = found[ClaimRules.followUpKey(key)] { stored.followUps = [followUp] }
            return stored
        }
    }

    /// Many decisions in one transaction, without a subtransaction each: the locks of their purchases (the
    /// notification side takes the same: a grant and a revocation of one purchase never interleave), one read of
    /// what the ledger holds about them, ``ClaimRules``' decisions, and one statement that writes them all. A
    /// batch that meets a concurrent writer (a unique violation, a deadlock) or a value refused is rolled back,
    /// and each decision is then recorded alone: only the one at fault fails (`conflict` is retried).
    static func record(_ decisions: [Decision], schema: PostgresSchema, on connection: PostgresConnection) throws
        -> [RecordAnswer]
    {
        do {
            return try recordTogether(decisions, schema: schema.name, on: connection).map { .outcome($0) }
        } catch let error as LedgerError {
            _ = try? connection.query("ROLLBACK")
            guard connection.isHealthy else { throw error }
            guard decisions.count > 1 else {
                switch error.code {
                case .conflict: return [.conflict]
                case .valueRefused: return [.failed(error)]
                default: throw error
                }
            }
            return try decisions.flatMap { try record([$0], schema: schema, on: connection) }
        }
    }

    private static func recordTogether(_ decisions: [Decision], schema: String, on connection: PostgresConnection)
        throws -> [LedgerOutcome]
    {
        try connection.begin()
        let claims = decisions.compactMap { decision in decision.grant.map { (decision.key.app, $0) } }
        var facts = try readFacts(decisions, claims: claims, schema: schema, on: connection)
        let results = ClaimRules.decide(decisions, facts: &facts)
        let grants = zip(decisions, results).compactMap { decision, result in
            result.grant.map { (decision.key.app, $0, result.revokedAt) }
        }
        let stored = zip(decisions, results).flatMap { decision, result in
            [
                result.result.map { (decision.key, $0) },
                result.followUp.map { (ClaimRules.followUpKey(decision.key), $0) },
            ]
            .compactMap { $0 }
        }
        if !grants.isEmpty || !stored.isEmpty {
            func array<T>(_ rows: [T], _ value: (T) -> String?) -> String? { PostgresArray.literal(rows.map(value)) }
            try connection.rows(
                """
                SELECT \(schema).claim_write_v2($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                    $7::text[], $8::integer[], $9::text[], $10::bigint[], $11::double precision[], $12::text[],
                    $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[])::text
                """,
                [
                    array(grants) { $0.0.rawValue }, array(grants) { $0.1.environment.rawValue },
                    array(grants) { $0.1.transactionID }, array(grants) { $0.1.orderID },
                    array(grants) { $0.1.purchaseID.key }, array(grants) { $0.1.userID },
                    array(grants) { $0.1.productID },
                    array(grants) { String($0.1.quantity) },
                    array(grants) { $0.1.purchaseID.isBillingPeriod ? $0.1.originalTransactionID : nil },
                    array(grants) { $0.1.revenue.map(String.init) },
                    array(grants) { $0.2.map { String($0.timeIntervalSince1970) } },
                    array(stored) { $0.0.app.rawValue }, array(stored) { $0.0.jobID },
                    array(stored) { $0.0.fingerprint },
                    array(stored) { String(decoding: $0.1.json, as: UTF8.self) }, array(stored) { $0.1.eventID },
                    array(stored) { $0.1.type }, array(stored) { $0.1.time }, array(stored) { $0.1.key },
                ])
        }
        try connection.query("COMMIT")
        return results.map(\.outcome)
    }

    /// What the ledger holds about the decisions' jobs, purchases and orders (``ClaimFacts``), in one
    /// statement: their stored results, the grants of their transactions, purchases and orders, and the
    /// refunds remembered for their purchases. Read after the locks, with a snapshot of its own (READ
    /// COMMITTED), so a grant another replica committed while this batch waited for a lock is seen.
    private static func readFacts(
        _ decisions: [Decision], claims: [(AppScope, GrantClaim)], schema: String, on connection: PostgresConnection
    ) throws -> ClaimFacts {
        let rows = try connection.rows(
            "SELECT * FROM \(schema).claim_facts_v2($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])",
            [
                PostgresArray.literal(claims.map { "\($0.0.rawValue)\u{1}\($0.1.environment)\u{1}\($0.1.purchaseID)" }),
                PostgresArray.literal(decisions.map(\.key.app.rawValue)),
                PostgresArray.literal(decisions.map(\.key.jobID)),
                PostgresArray.literal(claims.map { $0.0.rawValue }),
                PostgresArray.literal(claims.map { $0.1.environment.rawValue }),
                PostgresArray.literal(claims.map { $0.1.transactionID }),
                PostgresArray.literal(claims.map { $0.1.purchaseID.key }),
                PostgresArray.literal(claims.map { $0.1.orderID }),
            ])
        var facts = ClaimFacts()
        for row in rows where row.count == 10 {
            let text = { (index: Int) in row[index] ?? "" }
            switch row[0] {
            case "r":
                facts.addResult(
                    app: AppScope(text(1)), jobID: text(2), fingerprint: text(3),
                    StoredEvent(
                        eventID: text(4), type: text(5), time: text(6), key: text(7), json: Array(text(8).utf8)))
            case "g":
                facts.addGrant(
                    GrantFact(
                        app: AppScope(text(1)), environment: text(2), transactionID: text(3), purchaseID: text(4),
                        orderID: text(5), isJobGrant: row[6] == "true", creditEventID: row[7],
                        revoked: row[8] == "true",
                        revenue: row[9].flatMap { Int64($0) }))
            default:
                facts.addRefund(
                    RefundFact(
                        app: text(1), environment: text(2), purchaseID: text(3), transactionID: text(4),
                        share: row[5].flatMap { Int($0) },
                        at: row[6].flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }))
            }
        }
        return facts
    }

    // MARK: Notifications

    public func storedNotification(id: String) async throws -> NotificationRecord? {
        let name = schema.name
        return try await pool.withConnection { connection in
            try Transaction(connection: connection, schema: name).storedNotification(id: id).map { .replay($0.event) }
        }
    }

    public func apply(_ change: NotificationChange, event: @escaping @Sendable (PurchaseHolder) -> StoredEvent?)
        async throws -> NotificationRecord
    {
        try await inTransaction { try PurchaseRules.apply(change, event: event, in: $0) }
    }

    public func claimCredit(
        _ decision: Decision, answer: @escaping @Sendable (_ creditEventID: String, _ revenue: Int64?) -> StoredEvent
    ) async throws
        -> CreditClaim
    {
        // A job decided by another replica meanwhile fails its insert (a unique violation, retried): the retry
        // finds its answer.
        try await inTransaction { try PurchaseRules.claimCredit(decision, answer: answer, in: $0) }
    }

    // MARK: Purchases no job claimed

    public func creditUnclaimed(now: Date, limit: Int) async throws -> [StoredEvent] {
        try await inTransaction { try PurchaseRules.creditDue(now: now, limit: limit, in: $0) }
    }

    public func markCreditsPublished(eventIDs: [String]) async throws {
        guard !eventIDs.isEmpty else { return }
        let name = schema.name
        _ = try await pool.withConnection { connection in
            try connection.rows(
                "UPDATE \(name).unclaimed_purchases SET published = true WHERE event_id = ANY($1::text[]) AND NOT published",
                [PostgresArray.literal(eventIDs)])
        }
    }

    public func waitingUnclaimed() async throws -> Int {
        let name = schema.name
        let rows = try await pool.withConnection { connection in
            // Claimed by a job before its time: not waiting any more, though settled only then.
            try connection.query(
                """
                SELECT count(*)::text FROM \(name).unclaimed_purchases u WHERE u.state = 'waiting' AND NOT EXISTS
                    (SELECT 1 FROM \(name).grants g WHERE g.app = u.app AND g.environment = u.environment
                        AND g.purchase_id = u.purchase_id)
                """)
        }
        return rows.first.flatMap { $0 }.flatMap { Int($0) } ?? 0
    }

    /// Runs `body` in one transaction on one connection: committed when it returns, rolled back when it throws.
    private func inTransaction<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        let name = schema.name
        return try await pool.withConnection { connection in
            try connection.begin()
            do {
                let result = try body(Transaction(connection: connection, schema: name))
                try connection.query("COMMIT")
                return result
            } catch {
                _ = try? connection.query("ROLLBACK")
                throw error
            }
        }
    }

    /// ``PurchaseRules``' statements in PostgreSQL.
    private struct Transaction: PurchaseStateTransaction {
        let connection: PostgresConnection
        let schema: String

        func storedNotification(id: String) throws -> HandledNotification? {
            let rows = try connection.rows(
                """
                SELECT event_id, event_type, event_time, event_key, event FROM \(schema).notifications
                    WHERE notification_id = $1
                """, [id])
            guard let row = rows.first, row.count == 5 else { return nil }
            guard let json = row[4] else { return HandledNotification(event: nil) }
            return HandledNotification(
                event: StoredEvent(
                    eventID: row[0] ?? "", type: row[1] ?? "", time: row[2] ?? "", key: row[3] ?? "",
                    json: Array(json.utf8)))
        }

        func lock(_ purchase: PurchaseKey) throws {
            try connection.query(
                "SELECT pg_advisory_xact_lock(hashtext($1 || chr(1) || $2 || chr(1) || $3))",
                [purchase.app.rawValue, purchase.environment.rawValue, purchase.purchaseID.key])
        }

        func grant(of purchase: PurchaseKey, transactionID: String) throws -> GrantRecord? {
            try connection.rows(
                PostgresLedger.grantQuery(schema)
                    + """
                     WHERE g.app = $2 AND g.environment = $3
                        AND (g.transaction_id = $1 OR g.purchase_id = $1 OR g.purchase_id = $4)
                        ORDER BY g.transaction_id = $1 DESC LIMIT 1
                    """, [transactionID, purchase.app.rawValue, purchase.environment.rawValue, purchase.purchaseID.key]
            ).first.flatMap(PostgresLedger.grant)
        }

        func state(of purchase: PurchaseKey) throws -> PurchaseState? {
            try connection.rows(
                """
                SELECT revoked::text, extract(epoch FROM changed_at)::text, revoked_share::text
                    FROM \(schema).purchase_states
                    WHERE app = $1 AND environment = $2 AND purchase_id = $3 FOR UPDATE
                """, [purchase.app.rawValue, purchase.environment.rawValue, purchase.purchaseID.key]
            ).first.flatMap { row -> PurchaseState? in
                guard row.count == 3, let seconds = row[1].flatMap(Double.init) else { return nil }
                return PurchaseState(
                    revoked: row[0] == "true", at: Date(timeIntervalSince1970: seconds),
                    share: row[2].flatMap { Int($0) })
            }
        }

        func setState(of purchase: PurchaseKey, transactionID: String, revoked: Bool, at: Date, share: Int?) throws {
            try connection.rows(
                """
                INSERT INTO \(schema).purchase_states (app, environment, purchase_id, transaction_id, revoked, changed_at,
                    revoked_share)
                    VALUES ($1, $2, $3, $4, $5::boolean, to_timestamp($6::double precision), $7::integer)
                    ON CONFLICT (app, environment, purchase_id) DO UPDATE SET transaction_id = EXCLUDED.transaction_id,
                        revoked = EXCLUDED.revoked, changed_at = EXCLUDED.changed_at,
                        revoked_share = EXCLUDED.revoked_share
                """,
                [
                    purchase.app.rawValue, purchase.environment.rawValue, purchase.purchaseID.key, transactionID,
                    String(revoked), String(at.timeIntervalSince1970), share.map(String.init),
                ])
        }

        func setRevoked(_ revoked: Bool, purchase: PurchaseKey, transactionID: String) throws {
            try connection.rows(
                """
                UPDATE \(schema).grants SET revoked_at = \(revoked ? "coalesce(revoked_at, now())" : "NULL")
                    WHERE app = $1 AND environment = $2
                        AND (purchase_id = $3 OR transaction_id = $4 OR purchase_id = $4)
                """, [purchase.app.rawValue, purchase.environment.rawValue, purchase.purchaseID.key, transactionID])
        }

        func openConsumptionRequest(
            app: AppScope, environment: AppleEnvironment, transactionID: String, notificationID: String, respondBy: Date
        ) throws {
            try connection.rows(
                """
                INSERT INTO \(schema).consumption_requests (app, environment, transaction_id, notification_id,
                    respond_by, requested_at)
                    VALUES ($1, $2, $3, $4, to_timestamp($5::double precision),
                        to_timestamp($5::double precision) - interval '12 hours')
                    ON CONFLICT (app, environment, transaction_id) DO UPDATE SET
                        notification_id = EXCLUDED.notification_id, respond_by = EXCLUDED.respond_by,
                        requested_at = EXCLUDED.requested_at, answered_at = NULL
                        WHERE \(schema).consumption_requests.respond_by < EXCLUDED.respond_by
                """,
                [
                    app.rawValue, environment.rawValue, transactionID, notificationID,
                    String(respondBy.timeIntervalSince1970),
                ])
        }

        func insertNotification(id: String, event: StoredEvent?) throws {
            try connection.rows(
                """
                INSERT INTO \(schema).notifications (notification_id, event_id, event_type, event_time, event_key, event)
                    VALUES ($1, $2, $3, $4, $5, $6)
                """,
                [
                    id, event?.eventID, event?.type, event?.time, event?.key,
                    event.map { String(decoding: $0.json, as: UTF8.self) },
                ])
        }

        func subscriptionGrant(app: AppScope, environment: AppleEnvironment, originalTransactionID: String) throws
            -> GrantRecord?
        {
            // The first grant of the subscription: of its original transaction, else the oldest of its periods.
            try connection.rows(
                PostgresLedger.grantQuery(schema)
                    + """
                     WHERE g.app = $2 AND g.environment = $3
                        AND (g.transaction_id = $1 OR g.original_transaction_id = $1)
                        ORDER BY g.transaction_id = $1 DESC, g.granted_at LIMIT 1
                    """, [originalTransactionID, app.rawValue, environment.rawValue]
            ).first.flatMap(PostgresLedger.grant)
        }

        func subscriptionState(app: AppScope, environment: AppleEnvironment, originalTransactionID: String) throws
            -> SubscriptionState?
        {
            try connection.rows(
                """
                SELECT status, extract(epoch FROM expires_at)::text, extract(epoch FROM grace_period_expires_at)::text,
                    auto_renew::text, auto_renew_product_id, extract(epoch FROM changed_at)::text
                    FROM \(schema).subscriptions WHERE app = $1 AND environment = $2 AND original_transaction_id = $3
                """, [app.rawValue, environment.rawValue, originalTransactionID]
            ).first.flatMap { row -> SubscriptionState? in
                func date(_ text: String?) -> Date? {
                    text.flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
                }
                guard row.count == 6, let changedAt = date(row[5]) else { return nil }
                return SubscriptionState(
                    status: row[0] ?? "active", expiresAt: date(row[1]), gracePeriodExpiresAt: date(row[2]),
                    autoRenew: row[3].map { $0 == "true" }, autoRenewProductID: row[4], changedAt: changedAt)
            }
        }

        func setSubscriptionState(
            app: AppScope, environment: AppleEnvironment, originalTransactionID: String, _ state: SubscriptionState
        ) throws {
            func seconds(_ date: Date?) -> String? { date.map { String($0.timeIntervalSince1970) } }
            try connection.rows(
                """
                INSERT INTO \(schema).subscriptions (app, environment, original_transaction_id, status, expires_at,
                    grace_period_expires_at, auto_renew, auto_renew_product_id, changed_at)
                    VALUES ($1, $2, $3, $4, to_timestamp($5::double precision), to_timestamp($6::double precision),
                        $7::boolean, $8, to_timestamp($9::double precision))
                    ON CONFLICT (app, environment, original_transaction_id) DO UPDATE SET status = EXCLUDED.status,
                        expires_at = EXCLUDED.expires_at, grace_period_expires_at = EXCLUDED.grace_period_expires_at,
                        auto_renew = EXCLUDED.auto_renew, auto_renew_product_id = EXCLUDED.auto_renew_product_id,
                        changed_at = EXCLUDED.changed_at
                """,
                [
                    app.rawValue, environment.rawValue, originalTransactionID, state.status, seconds(state.expiresAt),
                    seconds(state.gracePeriodExpiresAt), state.autoRenew.map { String($0) }, state.autoRenewProductID,
                    seconds(state.changedAt),
                ])
        }

        func insertCredit(_ credit: Credit) throws -> Bool {
            !(try connection.rows(
                """
                INSERT INTO \(schema).grants (app, environment, transaction_id, order_id, purchase_id, user_id,
                    product_id, quantity, credit, original_transaction_id, credit_event_id, revenue)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8::integer, $9, $10, $11, $12::bigint)
                    ON CONFLICT DO NOTHING RETURNING 1
                """,
                [
                    credit.purchase.app.rawValue, credit.purchase.environment.rawValue, credit.transactionID,
                    credit.orderID,
                    credit.purchase.purchaseID.key, credit.userID, credit.productID, String(credit.quantity),
                    credit.kind.rawValue, credit.originalTransactionID, credit.eventID, credit.revenue.map(String.init),
                ]
            ).isEmpty)
        }

        func waitUnclaimed(app: AppScope, environment: AppleEnvironment, _ reported: ReportedPurchase) throws {
            let event = reported.event
            try connection.rows(
                """
                INSERT INTO \(schema).unclaimed_purchases (app, environment, purchase_id, transaction_id,
                    original_transaction_id, product_id, quantity, due_at, event_id, event_type, event_time, event_key,
                    event, revenue)
                    VALUES ($1, $2, $3, $4, $5, $6, $7::integer, to_timestamp($8::double precision), $9, $10, $11,
                        $12, $13, $14::bigint)
                    ON CONFLICT DO NOTHING
                """,
                [
                    app.rawValue, environment.rawValue, reported.purchaseID.key, reported.transactionID,
                    reported.originalTransactionID, reported.productID, String(reported.quantity),
                    String(reported.dueAt.timeIntervalSince1970), event.eventID, event.type, event.time, event.key,
                    String(decoding: event.json, as: UTF8.self), reported.revenue.map(String.init),
                ])
        }

        func dueUnclaimed(now: Date, limit: Int) throws -> [(AppScope, AppleEnvironment, ReportedPurchase)] {
            try connection.rows(
                """
                SELECT app, environment, purchase_id, transaction_id, original_transaction_id, product_id,
                    quantity::text, extract(epoch FROM due_at)::text, event_id, event_type, event_time, event_key, event,
                    revenue::text
                    FROM \(schema).unclaimed_purchases
                    WHERE state = 'waiting' AND due_at <= to_timestamp($1::double precision)
                    ORDER BY due_at LIMIT $2::integer FOR UPDATE SKIP LOCKED
                """, [String(now.timeIntervalSince1970), String(limit)]
            ).compactMap { row in
                guard row.count == 14 else { return nil }
                return (
                    AppScope(row[0] ?? ""), AppleEnvironment(rawValue: row[1] ?? ""),
                    ReportedPurchase(
                        purchaseID: PurchaseID(key: row[2] ?? ""), transactionID: row[3] ?? "",
                        originalTransactionID: row[4],
                        productID: row[5] ?? "", quantity: row[6].flatMap { Int($0) } ?? 1,
                        dueAt: row[7].flatMap(Double.init).map { Date(timeIntervalSince1970: $0) } ?? now,
                        event: StoredEvent(
                            eventID: row[8] ?? "", type: row[9] ?? "", time: row[10] ?? "", key: row[11] ?? "",
                            json: Array((row[12] ?? "").utf8)),
                        revenue: row[13].flatMap { Int64($0) })
                )
            }
        }

        func settleUnclaimed(_ purchase: PurchaseKey, _ outcome: UnclaimedOutcome) throws {
            try connection.rows(
                """
                UPDATE \(schema).unclaimed_purchases SET state = $4, settled_at = now()
                    WHERE app = $1 AND environment = $2 AND purchase_id = $3
                """, [purchase.app.rawValue, purchase.environment.rawValue, purchase.purchaseID.key, outcome.rawValue])
        }

        func unpublishedCredits(limit: Int) throws -> [StoredEvent] {
            try connection.rows(
                """
                SELECT u.event_id, u.event_type, u.event_time, u.event_key, u.event FROM \(schema).unclaimed_purchases u
                    WHERE NOT u.published AND u.state IN ('credited', 'tied') ORDER BY u.settled_at LIMIT $1::integer
                """, [String(limit)]
            ).compactMap { row in
                guard row.count == 5 else { return nil }
                return StoredEvent(
                    eventID: row[0] ?? "", type: row[1] ?? "", time: row[2] ?? "", key: row[3] ?? "",
                    json: Array((row[4] ?? "").utf8))
            }
        }

        func storedDecision(_ key: DecisionKey) throws -> StoredEvent? {
            try PostgresLedger.storedDecisions([key], schema: schema, on: connection).first ?? nil
        }

        func untiedCredit(of purchase: PurchaseKey, transactionID: String) throws -> UntiedCredit? {
            try connection.rows(
                """
                SELECT g.credit_event_id, g.original_transaction_id, (g.revoked_at IS NOT NULL)::text, g.revenue::text
                    FROM \(schema).grants g
                    WHERE g.app = $1 AND g.environment = $2 AND g.purchase_id = $3 AND g.credit = 'unclaimed'
                """, [purchase.app.rawValue, purchase.environment.rawValue, purchase.purchaseID.key]
            ).first.flatMap { row in
                guard row.count == 4, let eventID = row[0] else { return nil }
                return UntiedCredit(
                    eventID: eventID, originalTransactionID: row[1], revoked: row[2] == "true",
                    revenue: row[3].flatMap { Int64($0) })
            }
        }

        func creditHeld(of purchase: PurchaseKey, byOrder orderID: String) throws -> HeldCredit? {
            try connection.rows(
                """
                SELECT credit_event_id, revenue::text FROM \(schema).grants
                    WHERE app = $1 AND environment = $2 AND purchase_id = $3 AND order_id = $4
                        AND credit_event_id IS NOT NULL
                """, [purchase.app.rawValue, purchase.environment.rawValue, purchase.purchaseID.key, orderID]
            ).first.flatMap { row in
                guard row.count == 2, let eventID = row[0] else { return nil }
                return HeldCredit(eventID: eventID, revenue: row[1].flatMap { Int64($0) })
            }
        }

        func orderGranted(app: AppScope, orderID: String) throws -> Bool {
            !(try connection.rows(
                "SELECT 1 FROM \(schema).grants WHERE app = $1 AND order_id = $2 AND credit = 'job'",
                [app.rawValue, orderID]
            ).isEmpty)
        }

        func tieCredit(of purchase: PurchaseKey, transactionID: String, to claim: GrantClaim) throws {
            let scope: [String?] = [
                purchase.app.rawValue, purchase.environment.rawValue, purchase.purchaseID.key, claim.orderID,
                claim.userID,
            ]
            // The subscription's periods credited meanwhile go with it.
            try connection.rows(
                """
                UPDATE \(schema).grants SET order_id = $4, user_id = $5
                    WHERE app = $1 AND environment = $2 AND credit = 'renewal' AND order_id = (SELECT order_id
                        FROM \(schema).grants WHERE app = $1 AND environment = $2 AND purchase_id = $3)
                """, scope)
            try connection.rows(
                """
                UPDATE \(schema).grants SET order_id = $4, user_id = $5, credit = 'job'
                    WHERE app = $1 AND environment = $2 AND purchase_id = $3
                """, scope)
            try connection.rows(
                """
                UPDATE \(schema).unclaimed_purchases SET state = 'tied'
                    WHERE app = $1 AND environment = $2 AND purchase_id = $3
                """, Array(scope.prefix(3)))
        }

        func insertResult(_ key: DecisionKey, event: StoredEvent) throws {
            try connection.rows(
                """
                INSERT INTO \(schema).results (app, job_id, fingerprint, event, event_id, event_type, event_time,
                    event_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                """,
                [
                    key.app.rawValue, key.jobID, key.fingerprint, String(decoding: event.json, as: UTF8.self),
                    event.eventID, event.type, event.time, event.key,
                ])
        }
    }

    // MARK: Consumption requests

    public func grant(transactionID: String, app: AppScope?) async throws -> GrantRecord? {
        let name = schema.name
        return try await pool.withConnection { connection in
            try connection.rows(
                Self.grantQuery(name)
                    + """
                     WHERE (g.transaction_id = $1 OR g.purchase_id = $1) AND ($2::text IS NULL OR g.app = $2)
                        ORDER BY g.transaction_id = $1 DESC, g.environment = 'Production' DESC LIMIT 1
                    """, [transactionID, app?.rawValue]
            ).first.flatMap(Self.grant)
        }
    }

    public func answerConsumptionRequest(app: AppScope, environment: AppleEnvironment, transactionID: String)
        async throws
    {
        let name = schema.name
        _ = try await pool.withConnection { connection in
            try connection.rows(
                """
                UPDATE \(name).consumption_requests SET answered_at = now()
                    WHERE app = $1 AND environment = $2 AND transaction_id = $3
                """, [app.rawValue, environment.rawValue, transactionID])
        }
    }

    // MARK: Offsets (OffsetStore)

    public func recordOffsets(_ offsets: [ConsumedPartition: Int64], group: String) async throws {
        guard !offsets.isEmpty else { return }
        let name = schema.name
        let entries = Array(offsets)
        try await pool.withConnection { connection in
            try connection.begin()
            do {
                // One statement for every partition: a commit round costs one write, whatever the assignment.
                _ = try connection.rows(
                    """
                    INSERT INTO \(name).consumer_offsets (group_id, topic, partition, next_offset)
                        SELECT $1, topic, partition, next_offset
                            FROM unnest($2::text[], $3::integer[], $4::bigint[]) AS o(topic, partition, next_offset)
                        ON CONFLICT (group_id, topic, partition) DO UPDATE SET
                            next_offset = GREATEST(\(name).consumer_offsets.next_offset, EXCLUDED.next_offset),
                            recorded_at = now()
                    """,
                    [
                        group, PostgresArray.literal(entries.map(\.key.topic)),
                        PostgresArray.literal(entries.map { String($0.key.partition) }),
                        PostgresArray.literal(entries.map { String($0.value) }),
                    ])
                try connection.query("COMMIT")
            } catch {
                _ = try? connection.query("ROLLBACK")
                throw error
            }
        }
    }

    public func recordedOffsets(group: String) async throws -> RecordedOffsets {
        let name = schema.name
        let (rows, baseline) = try await pool.withConnection { connection in
            (
                try connection.rows(
                    "SELECT topic, partition::text, next_offset::text FROM \(name).consumer_offsets WHERE group_id = $1",
                    [group]),
                try connection.query("SELECT value FROM \(name).ledger_meta WHERE key = 'offsets_baseline'").first
                    ?? nil
            )
        }
        var offsets: [ConsumedPartition: Int64] = [:]
        for row in rows where row.count == 3 {
            guard let topic = row[0], let partition = row[1].flatMap(Int32.init),
                let offset = row[2].flatMap(Int64.init)
            else { continue }
            offsets[ConsumedPartition(topic: topic, partition: partition)] = offset
        }
        return RecordedOffsets(offsets: offsets, startedEmpty: baseline == "empty")
    }

    public func oldestOpenConsumptionRequest() async throws -> Date? {
        let name = schema.name
        let rows = try await pool.withConnection { connection in
            try connection.query(
                """
                SELECT extract(epoch FROM min(requested_at))::text FROM \(name).consumption_requests
                    WHERE answered_at IS NULL AND respond_by > now()
                """)
        }
        return rows.first.flatMap { $0 }.flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
    }

    /// A grant with its order fields, its transaction's consumption deadline (`$1`: the transaction id), what its
    /// sale counted and the share refunded while it is revoked.
    static func grantQuery(_ schema: String) -> String {
        """
        SELECT g.app, g.environment, g.order_id, g.transaction_id, coalesce(g.user_id, ''), coalesce(g.product_id, ''),
            coalesce(g.quantity, 1)::text, (g.revoked_at IS NOT NULL)::text,
            (SELECT extract(epoch FROM c.respond_by)::text FROM \(schema).consumption_requests c
                WHERE c.app = g.app AND c.environment = g.environment AND c.transaction_id = $1),
            g.revenue::text,
            (SELECT coalesce(s.revoked_share, 100000)::text FROM \(schema).purchase_states s WHERE s.app = g.app
                AND s.environment = g.environment AND s.purchase_id = g.purchase_id AND s.revoked)
        FROM \(schema).grants g
        """
    }

    static func grant(_ row: [String?]) -> GrantRecord? {
        guard row.count == 11, let order = row[2], let transaction = row[3] else { return nil }
        let revoked = row[7] == "true"
        return GrantRecord(
            app: AppScope(row[0] ?? ""), environment: row[1].map(AppleEnvironment.init) ?? .production,
            orderID: order,
            transactionID: transaction, userID: row[4] ?? "", productID: row[5] ?? "",
            quantity: row[6].flatMap { Int($0) } ?? 1, revoked: revoked,
            consumptionRespondBy: row[8].flatMap(Double.init).map { Date(timeIntervalSince1970: $0) },
            revenue: row[9].flatMap { Int64($0) }, refundedShare: revoked ? row[10].flatMap { Int($0) } ?? 100_000 : nil
        )
    }

    // MARK: Upkeep

    public func ping() async throws {
        // Writable, not merely reachable: a failover replica answers SELECT 1 but refuses every decision.
        let readOnly = try await pool.withConnection {
            try $0.query("SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'")
        }
        if readOnly.first == "t" { throw LedgerError(.unavailable, "postgresql: the server is read-only (a standby?)") }
    }

    public func close() async {
        pool.close()
    }

    /// Deletes stored results decided before `cutoff`, 10,000 rows a transaction (short locks, a bounded
    /// WAL burst). Under a try-lock: with many replicas pruning on a timer, one does the work at a time and
    /// the others return 0 at once.
    public func pruneResults(decidedBefore cutoff: Date) async throws -> Int {
        try await pruneInBatches(
            // Support's credits (`support:` job ids) are kept: who credited a purchase by hand, and why, for good.
            "SELECT ctid FROM \(schema.name).results WHERE decided_at < $1::timestamptz AND job_id NOT LIKE 'support:%'"
                + " LIMIT 10000", table: "results",
            cutoff: cutoff)
    }

    public func prune(_ retention: Retention) async throws -> [Retention.Kind: Int] {
        let name = schema.name
        var deleted: [Retention.Kind: Int] = [:]
        for kind in Retention.Kind.allCases {
            guard let cutoff = retention.cutoff(kind) else { continue }
            let (table, doomed): (String, String) =
                switch kind {
                case .notifications: ("notifications", "handled_at < $1::timestamptz")
                case .consumptionRequests: ("consumption_requests", "respond_by < $1::timestamptz")
                case .unclaimedPurchases:
                    (
                        "unclaimed_purchases",
                        "state <> 'waiting' AND settled_at < $1::timestamptz AND (published OR state IN ('claimed', 'refunded'))"
                    )
                case .purchaseStates: ("purchase_states", "NOT revoked AND changed_at < $1::timestamptz")
                }
            deleted[kind] = try await pruneInBatches(
                "SELECT ctid FROM \(name).\(table) WHERE \(doomed) LIMIT 10000", table: table, cutoff: cutoff)
        }
        return deleted
    }

    /// Deletes the rows `select` finds (their `ctid`s, at most 10,000), again until fewer come back: bounded
    /// transactions, so pruning a year's backlog never holds a lock or a WAL burst for long. Under a try-lock:
    /// with many replicas pruning on a timer, one does the work at a time and the others return 0 at once.
    private func pruneInBatches(_ select: String, table: String, cutoff: Date) async throws -> Int {
        let name = schema.name
        let since = Timestamp.rfc3339(cutoff)
        var total = 0
        while true {
            let deleted = try await pool.withConnection { connection -> Int? in
                try connection.begin()
                do {
                    guard
                        try connection.query("SELECT pg_try_advisory_xact_lock(\(PostgresSchema.pruneLock))").first
                            == "t"
                    else {
                        try connection.query("ROLLBACK")
                        return nil
                    }
                    let rows = try connection.query(
                        "WITH doomed AS (\(select)) DELETE FROM \(name).\(table) r USING doomed WHERE r.ctid = doomed.ctid RETURNING 1",
                        [since])
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

    /// Applies the schema's missing migrations without opening a ledger (`receipt-worker ledger migrate`), then,
    /// with `role`, grants that role what the worker needs (``PostgresSchema/grants(to:)``) in one transaction:
    /// every run, so a migration that adds a table or a function is granted too (GRANT is idempotent).
    public static func migrate(url: String, schema: PostgresSchema, grantingTo role: String? = nil) async throws
        -> [PostgresSchema.Applied]
    {
        let thread = BlockingThread(name: "ledger-migrate")
        defer { thread.stop() }
        return try await thread.perform {
            let connection = try PostgresConnection(url: url)
            let applied = try schema.migrate(on: connection)
            guard let role else { return applied }
            try connection.query("BEGIN")
            do {
                for grant in schema.grants(to: role) { try connection.query(grant) }
                try connection.query("COMMIT")
            } catch {
                _ = try? connection.query("ROLLBACK")
                throw error
            }
            return applied
        }
    }

}
