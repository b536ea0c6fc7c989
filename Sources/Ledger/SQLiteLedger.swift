import Dispatch
import Foundation
import Observability
import Vocabulary

/// The ledger in one SQLite file, for a single host (`sqlite::memory:`: in memory, for tests). Every statement
/// runs on one serial queue (SQLite has one writer at a time anyway), off Swift's cooperative pool; WAL keeps
/// readers out of the writer's way.
///
/// `@unchecked Sendable`: the connection is touched only on `queue`.
public final class SQLiteLedger: Ledger, @unchecked Sendable {
    let queue = DispatchQueue(label: "ledger.sqlite")
    let connection: SQLiteConnection
    private let path: String
    /// The file this ledger opened (device and inode): decisions written after it was deleted or replaced
    /// would be lost at the next start, and its grants granted again. Nil in memory.
    private let identity: FileIdentity?
    /// Decisions recorded together (``recordBatch(_:)``); set once, at the end of `init`.
    private var records: Batcher<Decision, RecordAnswer>!
    /// Lookups that arrive together, answered in one turn of the queue.
    private var lookups: Batcher<DecisionKey, Result<StoredEvent?, any Error>>!

    /// One decision's answer in a batch: its outcome, or the error that rolled it back alone.
    private enum RecordAnswer: Sendable {
        case outcome(LedgerOutcome)
        case failed(any Error)
    }

    /// `defaultBundleID`: the default app's bundle id (`apple.bundle_id`), which migrating a file of an
    /// earlier release needs (each row gets the app its event names; see ``SQLiteSchema``).
    public init(path: String, defaultBundleID: String? = nil) throws {
        connection = try SQLiteConnection(path: path)
        self.path = path
        identity = path == ":memory:" ? nil : FileIdentity(path: path)
        if path != ":memory:" && identity == nil {
            throw LedgerError(.unavailable, "sqlite \(path): the file cannot be read after opening it")
        }
        try connection.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;")
        try SQLiteSchema.migrate(connection, defaultBundleID: defaultBundleID)
        try SQLiteSchema.checkDefaultApp(connection, defaultBundleID: defaultBundleID)
        // A batch's savepoint per decision journals the pages the decision changes: SQLite keeps that statement
        // journal in memory only up to 64 KiB, then writes it to a temporary file for the rest of the
        // transaction, and every later decision of the batch wrote its pages there too (about 40 KiB per job,
        // half the ledger's CPU). In memory it is emptied at each RELEASE, so it holds one decision's pages.
        // Set after the migrations, whose one-off statements over whole tables may journal much more.
        try connection.execute("PRAGMA temp_store = MEMORY;")
        // One at a time: SQLite has one writer; what arrives meanwhile waits and goes in the next commit.
        records = Batcher(maxBatch: 256, maxConcurrent: 1) { [unowned self] decisions in
            try await self.queue.perform { self.recordBatch(decisions) }
        }
        lookups = Batcher(maxBatch: 256, maxConcurrent: 1) { [unowned self] keys in
            try await self.queue.perform { keys.map { key in Result { try self.storedDecisionNow(key) } } }
        }
    }

    // MARK: Decisions

    public func storedDecision(_ key: DecisionKey) async throws -> StoredEvent? {
        try await lookups.submit(key).get()
    }

    public func record(_ decision: Decision) async throws -> LedgerOutcome {
        switch try await records.submit(decision) {
        case .outcome(let outcome): return outcome
        case .failed(let error): throw error
        }
    }

    /// Group commit: the decisions that arrived while the previous commit ran, in one transaction (one WAL
    /// commit instead of one each: the writes and the fsyncs were a quarter of the worker's CPU). What the
    /// ledger holds about them is read first, ``ClaimRules`` decides each in order, and its rows are written;
    /// no savepoint per decision. A write that fails (a value refused) rolls the batch back, and each decision
    /// is then recorded alone, so only that one fails.
    private func recordBatch(_ decisions: [Decision]) -> [RecordAnswer] {
        do {
            try checkFile()
            try connection.execute("BEGIN IMMEDIATE")
        } catch {
            return decisions.map { _ in .failed(error) }
        }
        do {
            var facts = try readFacts(decisions)
            let results = ClaimRules.decide(decisions, facts: &facts)
            for (decision, result) in zip(decisions, results) {
                if let grant = result.grant {
                    try insertGrant(grant, app: decision.key.app, revokedAt: result.revokedAt)
                }
                if let event = result.result { try Self.insertResult(decision.key, event: event, on: connection) }
                if let followUp = result.followUp {
                    try Self.insertResult(ClaimRules.followUpKey(decision.key), event: followUp, on: connection)
                }
            }
            try connection.execute("COMMIT")
            return results.map { .outcome($0.outcome) }
        } catch {
            try? connection.execute("ROLLBACK")  // the original error is the one to report
            guard decisions.count > 1 else { return [.failed(error)] }
            return decisions.flatMap { recordBatch([$0]) }
        }
    }

    /// What the ledger holds about the decisions' jobs, purchases and orders (``ClaimFacts``). Each query an
    /// exact key of an index: an OR of columns would make SQLite read every grant of the app and environment.
    private func readFacts(_ decisions: [Decision]) throws -> ClaimFacts {
        var facts = ClaimFacts()
        for decision in decisions {
            let key = decision.key
            try connection.query(
                """
                SELECT fingerprint, event_id, event_type, event_time, event_key, event FROM results
                    WHERE app = ?1 AND job_id = ?2 AND fingerprint IN (?3, '', ?4)
                """,
                [
                    .text(key.app.rawValue), .text(key.jobID), .text(key.fingerprint),
                    .text(ClaimRules.followUpKey(key).fingerprint),
                ]
            ) { row in
                facts.addResult(
                    app: key.app, jobID: key.jobID, fingerprint: row.text(0) ?? "",
                    StoredEvent(
                        eventID: row.text(1) ?? "", type: row.text(2) ?? "", time: row.text(3) ?? "",
                        key: row.text(4) ?? "", json: row.bytes(5) ?? []))
            }
            guard let grant = decision.grant else { continue }
            let app = Value.text(key.app.rawValue)
            let scope: [Value] = [
                app, .text(grant.environment.rawValue), .text(grant.transactionID), .text(grant.purchaseID.key),
            ]
            try connection.query(
                Self.grantFactColumns + " WHERE app = ?1 AND environment = ?2 AND transaction_id IN (?3, ?4)"
                    + " UNION ALL " + Self.grantFactColumns
                    + " WHERE app = ?1 AND environment = ?2 AND purchase_id = ?4",
                scope
            ) { facts.addGrant(Self.grantFact($0)) }
            try connection.query(
                Self.grantFactColumns + " WHERE app = ?1 AND order_id = ?2 AND credit = 'job'",
                [app, .text(grant.orderID)]
            ) { facts.addGrant(Self.grantFact($0)) }
            let refundColumns = "SELECT app, environment, purchase_id, transaction_id, revoked_share, changed_at"
            try connection.query(
                """
                \(refundColumns) FROM purchase_states
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?4 AND revoked
                UNION ALL \(refundColumns) FROM purchase_states
                    WHERE app = ?1 AND environment = ?2 AND transaction_id = ?3 AND revoked
                UNION ALL \(refundColumns) FROM purchase_states
                    WHERE app = '*' AND (purchase_id = ?4 OR transaction_id = ?3) AND revoked
                """, scope
            ) { row in
                facts.addRefund(
                    RefundFact(
                        app: row.text(0) ?? "", environment: row.text(1) ?? "", purchaseID: row.text(2) ?? "",
                        transactionID: row.text(3) ?? "", share: row.integer(4),
                        at: row.text(5).flatMap(RFC3339Milliseconds.parse)))
            }
        }
        return facts
    }

    private static let grantFactColumns = """
        SELECT app, environment, transaction_id, purchase_id, order_id, credit = 'job', credit_event_id,
            revoked_at IS NOT NULL, revenue FROM grants
        """

    private static func grantFact(_ row: SQLiteConnection.Row) -> GrantFact {
        GrantFact(
            app: AppScope(row.text(0) ?? ""), environment: row.text(1) ?? "", transactionID: row.text(2) ?? "",
            purchaseID: row.text(3) ?? "", orderID: row.text(4) ?? "", isJobGrant: row.integer(5) == 1,
            creditEventID: row.text(6), revoked: row.integer(7) == 1, revenue: row.integer(8).map(Int64.init))
    }

    /// A job's grant. Not the event (its result row keeps it): what later events name has columns of its own.
    /// `revokedAt`: a purchase refunded in part before it was granted is granted revoked.
    private func insertGrant(_ grant: GrantClaim, app: AppScope, revokedAt: Date?) throws {
        try connection.run(
            """
            INSERT INTO grants (app, environment, transaction_id, order_id, purchase_id, user_id, product_id,
                quantity, original_transaction_id, revenue, revoked_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,
                ?10, ?11)
            """,
            [
                .text(app.rawValue), .text(grant.environment.rawValue), .text(grant.transactionID),
                .text(grant.orderID),
                .text(grant.purchaseID.key), .text(grant.userID), .text(grant.productID), .integer(grant.quantity),
                grant.purchaseID.isBillingPeriod ? .optional(grant.originalTransactionID) : .null,
                grant.revenue.map { .integer(Int($0)) } ?? .null, .optional(revokedAt.map(Timestamp.rfc3339)),
            ])
    }

    private func storedDecisionNow(_ key: DecisionKey) throws -> StoredEvent? {
        try Self.storedDecision(key, on: connection)
    }

    fileprivate static func storedDecision(_ key: DecisionKey, on connection: SQLiteConnection) throws -> StoredEvent? {
        // A result stored before fingerprints ("") answers any content of its job id, as it did then.
        guard
            var stored = try connection.first(
                """
                SELECT event_id, event_type, event_time, event_key, event FROM results
                    WHERE app = ?1 AND job_id = ?2 AND fingerprint IN (?3, '') ORDER BY fingerprint = ?3 DESC LIMIT 1
                """, [.text(key.app.rawValue), .text(key.jobID), .text(key.fingerprint)], Self.event)
        else { return nil }
        let followUp = ClaimRules.followUpKey(key)
        if let event = try connection.first(
            """
            SELECT event_id, event_type, event_time, event_key, event FROM results
                WHERE app = ?1 AND job_id = ?2 AND fingerprint = ?3
            """, [.text(followUp.app.rawValue), .text(followUp.jobID), .text(followUp.fingerprint)], Self.event)
        {
            stored.followUps = [event]
        }
        return stored
    }

    fileprivate static func insertResult(_ key: DecisionKey, event: StoredEvent, on connection: SQLiteConnection) throws
    {
        try connection.run(
            """
            INSERT INTO results (app, job_id, fingerprint, event_id, event_type, event_time, event_key, event)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
            """,
            [
                .text(key.app.rawValue), .text(key.jobID), .text(key.fingerprint), .text(event.eventID),
                .text(event.type), .text(event.time), .text(event.key), .blob(event.json),
            ])
    }

    // MARK: Notifications

    public func storedNotification(id: String) async throws -> NotificationRecord? {
        try await queue.perform {
            try Transaction(connection: self.connection).storedNotification(id: id).map { .replay($0.event) }
        }
    }

    public func apply(_ change: NotificationChange, event: @escaping @Sendable (PurchaseHolder) -> StoredEvent?)
        async throws -> NotificationRecord
    {
        try await queue.perform {
            try self.checkFile()
            // One writer at a time (BEGIN IMMEDIATE): a grant and a revocation of one purchase never interleave.
            return try self.transaction {
                (try PurchaseRules.apply(change, event: event, in: Transaction(connection: self.connection)), true)
            }
        }
    }

    public func claimCredit(
        _ decision: Decision, answer: @escaping @Sendable (_ creditEventID: String, _ revenue: Int64?) -> StoredEvent
    ) async throws
        -> CreditClaim
    {
        try await queue.perform {
            try self.checkFile()
            return try self.transaction {
                let claim = try PurchaseRules.claimCredit(
                    decision, answer: answer, in: Transaction(connection: self.connection))
                if case .tied = claim { return (claim, true) }
                return (claim, false)
            }
        }
    }

    // MARK: Purchases no job claimed

    public func creditUnclaimed(now: Date, limit: Int) async throws -> [StoredEvent] {
        try await queue.perform {
            try self.checkFile()
            return try self.transaction {
                (
                    try PurchaseRules.creditDue(now: now, limit: limit, in: Transaction(connection: self.connection)),
                    true
                )
            }
        }
    }

    public func markCreditsPublished(eventIDs: [String]) async throws {
        guard !eventIDs.isEmpty else { return }
        try await queue.perform {
            try self.transaction {
                for id in eventIDs {
                    try self.connection.run(
                        "UPDATE unclaimed_purchases SET published = 1 WHERE event_id = ?1 AND published = 0",
                        [.text(id)])
                }
                return ((), true)
            }
        }
    }

    public func waitingUnclaimed() async throws -> Int {
        try await queue.perform {
            // Claimed by a job before its time: not waiting any more, though settled only then.
            try self.connection.first(
                """
                SELECT count(*) FROM unclaimed_purchases u WHERE u.state = 'waiting' AND NOT EXISTS (SELECT 1 FROM
                    grants g WHERE g.app = u.app AND g.environment = u.environment AND g.purchase_id = u.purchase_id)
                """
            ) {
                $0.integer(0) ?? 0
            } ?? 0
        }
    }

    /// ``PurchaseRules``' statements in SQLite.
    private struct Transaction: PurchaseStateTransaction {
        let connection: SQLiteConnection

        func storedNotification(id: String) throws -> HandledNotification? {
            try connection.first(
                "SELECT event_id, event_type, event_time, event_key, event FROM notifications WHERE notification_id = ?1",
                [.text(id)]
            ) { row in HandledNotification(event: row.bytes(4) == nil ? nil : SQLiteLedger.event(row)) }
        }

        func lock(_ purchase: PurchaseKey) throws {}  // BEGIN IMMEDIATE holds the only write lock

        func grant(of purchase: PurchaseKey, transactionID: String) throws -> GrantRecord? {
            // Each branch an exact key of a unique index: an OR of columns would make SQLite read every grant
            // of the app and environment (it did: 23 times slower at 20,000 grants).
            try connection.first(
                SQLiteLedger.grantQuery
                    + ", 0 FROM grants g WHERE g.app = ?2 AND g.environment = ?3 AND g.transaction_id = ?1"
                    + " UNION ALL "
                    + SQLiteLedger.grantQuery
                    + ", 1 FROM grants g WHERE g.app = ?2 AND g.environment = ?3 AND g.purchase_id IN (?1, ?4)"
                    + " ORDER BY 12 LIMIT 1",
                [
                    .text(transactionID), .text(purchase.app.rawValue), .text(purchase.environment.rawValue),
                    .text(purchase.purchaseID.key),
                ], SQLiteLedger.grant)
        }

        func state(of purchase: PurchaseKey) throws -> PurchaseState? {
            try connection.first(
                """
                SELECT revoked, changed_at, revoked_share FROM purchase_states
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                """,
                [.text(purchase.app.rawValue), .text(purchase.environment.rawValue), .text(purchase.purchaseID.key)]
            ) { row in
                RFC3339Milliseconds.parse(row.text(1) ?? "").map {
                    PurchaseState(revoked: row.integer(0) == 1, at: $0, share: row.integer(2))
                }
            } ?? nil
        }

        func setState(of purchase: PurchaseKey, transactionID: String, revoked: Bool, at: Date, share: Int?) throws {
            try connection.run(
                """
                INSERT INTO purchase_states (app, environment, purchase_id, transaction_id, revoked, changed_at,
                    revoked_share) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                    ON CONFLICT (app, environment, purchase_id) DO UPDATE SET transaction_id = excluded.transaction_id,
                        revoked = excluded.revoked, changed_at = excluded.changed_at,
                        revoked_share = excluded.revoked_share
                """,
                [
                    .text(purchase.app.rawValue), .text(purchase.environment.rawValue), .text(purchase.purchaseID.key),
                    .text(transactionID), .integer(revoked ? 1 : 0), .text(Timestamp.rfc3339(at)),
                    share.map { .integer($0) } ?? .null,
                ])
        }

        func setRevoked(_ revoked: Bool, purchase: PurchaseKey, transactionID: String) throws {
            try connection.run(
                "UPDATE grants SET revoked_at = "
                    + (revoked ? "coalesce(revoked_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))" : "NULL")
                    + " WHERE rowid IN (SELECT rowid FROM grants WHERE app = ?1 AND environment = ?2"
                    + " AND purchase_id IN (?3, ?4) UNION ALL SELECT rowid FROM grants WHERE app = ?1"
                    + " AND environment = ?2 AND transaction_id = ?4)",
                [
                    .text(purchase.app.rawValue), .text(purchase.environment.rawValue), .text(purchase.purchaseID.key),
                    .text(transactionID),
                ])
        }

        func openConsumptionRequest(
            app: AppScope, environment: AppleEnvironment, transactionID: String, notificationID: String, respondBy: Date
        ) throws {
            try connection.run(
                """
                INSERT INTO consumption_requests (app, environment, transaction_id, notification_id, respond_by,
                    requested_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                    ON CONFLICT (app, environment, transaction_id) DO UPDATE SET
                        notification_id = excluded.notification_id, respond_by = excluded.respond_by,
                        requested_at = excluded.requested_at, answered_at = NULL
                        WHERE consumption_requests.respond_by < excluded.respond_by
                """,
                [
                    .text(app.rawValue), .text(environment.rawValue), .text(transactionID), .text(notificationID),
                    .text(Timestamp.rfc3339(respondBy)),
                    .text(Timestamp.rfc3339(respondBy.addingTimeInterval(-consumptionWindow))),
                ])
        }

        func insertNotification(id: String, event: StoredEvent?) throws {
            try connection.run(
                """
                INSERT INTO notifications (notification_id, event_id, event_type, event_time, event_key, event)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                """,
                [
                    .text(id), .optional(event?.eventID), .optional(event?.type), .optional(event?.time),
                    .optional(event?.key), event.map { .blob($0.json) } ?? .null,
                ])
        }

        func subscriptionGrant(app: AppScope, environment: AppleEnvironment, originalTransactionID: String) throws
            -> GrantRecord?
        {
            // The first grant of the subscription: of its original transaction, else the oldest of its periods.
            try connection.first(
                SQLiteLedger.grantQuery
                    + ", 0, 0 FROM grants g WHERE g.app = ?2 AND g.environment = ?3 AND g.transaction_id = ?1"
                    + " UNION ALL "
                    + SQLiteLedger.grantQuery
                    + ", 1, g.rowid FROM grants g WHERE g.app = ?2 AND g.environment = ?3"
                    + " AND g.original_transaction_id = ?1 ORDER BY 12, 13 LIMIT 1",
                [.text(originalTransactionID), .text(app.rawValue), .text(environment.rawValue)], SQLiteLedger.grant)
        }

        func subscriptionState(app: AppScope, environment: AppleEnvironment, originalTransactionID: String) throws
            -> SubscriptionState?
        {
            try connection.first(
                """
                SELECT status, expires_at, grace_period_expires_at, auto_renew, auto_renew_product_id, changed_at
                    FROM subscriptions WHERE app = ?1 AND environment = ?2 AND original_transaction_id = ?3
                """, [.text(app.rawValue), .text(environment.rawValue), .text(originalTransactionID)]
            ) { row -> SubscriptionState? in
                guard let changedAt = row.text(5).flatMap(RFC3339Milliseconds.parse) else { return nil }
                return SubscriptionState(
                    status: row.text(0) ?? "active", expiresAt: row.text(1).flatMap(RFC3339Milliseconds.parse),
                    gracePeriodExpiresAt: row.text(2).flatMap(RFC3339Milliseconds.parse),
                    autoRenew: row.integer(3).map { $0 == 1 }, autoRenewProductID: row.text(4), changedAt: changedAt)
            } ?? nil
        }

        func setSubscriptionState(
            app: AppScope, environment: AppleEnvironment, originalTransactionID: String, _ state: SubscriptionState
        ) throws {
            try connection.run(
                """
                INSERT OR REPLACE INTO subscriptions (app, environment, original_transaction_id, status, expires_at,
                    grace_period_expires_at, auto_renew, auto_renew_product_id, changed_at)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                """,
                [
                    .text(app.rawValue), .text(environment.rawValue), .text(originalTransactionID), .text(state.status),
                    .optional(state.expiresAt.map(Timestamp.rfc3339)),
                    .optional(state.gracePeriodExpiresAt.map(Timestamp.rfc3339)),
                    state.autoRenew.map { .integer($0 ? 1 : 0) } ?? .null, .optional(state.autoRenewProductID),
                    .text(Timestamp.rfc3339(state.changedAt)),
                ])
        }

        func insertCredit(_ credit: Credit) throws -> Bool {
            try connection.run(
                """
                INSERT INTO grants (app, environment, transaction_id, order_id, purchase_id, user_id, product_id,
                    quantity, credit, original_transaction_id, credit_event_id, revenue)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT DO NOTHING
                """,
                [
                    .text(credit.purchase.app.rawValue), .text(credit.purchase.environment.rawValue),
                    .text(credit.transactionID),
                    .text(credit.orderID), .text(credit.purchase.purchaseID.key), .text(credit.userID),
                    .text(credit.productID), .integer(credit.quantity), .text(credit.kind.rawValue),
                    .optional(credit.originalTransactionID), .text(credit.eventID),
                    credit.revenue.map { .integer(Int($0)) } ?? .null,
                ]) > 0
        }

        func waitUnclaimed(app: AppScope, environment: AppleEnvironment, _ reported: ReportedPurchase) throws {
            let event = reported.event
            try connection.run(
                """
                INSERT INTO unclaimed_purchases (app, environment, purchase_id, transaction_id, original_transaction_id,
                    product_id, quantity, due_at, event_id, event_type, event_time, event_key, event, revenue)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) ON CONFLICT DO NOTHING
                """,
                [
                    .text(app.rawValue), .text(environment.rawValue), .text(reported.purchaseID.key),
                    .text(reported.transactionID),
                    .optional(reported.originalTransactionID), .text(reported.productID), .integer(reported.quantity),
                    .text(Timestamp.rfc3339(reported.dueAt)), .text(event.eventID), .text(event.type),
                    .text(event.time), .text(event.key), .blob(event.json),
                    reported.revenue.map { .integer(Int($0)) } ?? .null,
                ])
        }

        func dueUnclaimed(now: Date, limit: Int) throws -> [(AppScope, AppleEnvironment, ReportedPurchase)] {
            var due: [(AppScope, AppleEnvironment, ReportedPurchase)] = []
            try connection.query(
                """
                SELECT app, environment, purchase_id, transaction_id, original_transaction_id, product_id, quantity,
                    due_at, event_id, event_type, event_time, event_key, event, revenue
                    FROM unclaimed_purchases WHERE state = 'waiting' AND due_at <= ?1 ORDER BY due_at LIMIT ?2
                """, [.text(Timestamp.rfc3339(now)), .integer(limit)]
            ) { row in
                due.append(
                    (
                        AppScope(row.text(0) ?? ""), AppleEnvironment(rawValue: row.text(1) ?? ""),
                        ReportedPurchase(
                            purchaseID: PurchaseID(key: row.text(2) ?? ""), transactionID: row.text(3) ?? "",
                            originalTransactionID: row.text(4), productID: row.text(5) ?? "",
                            quantity: row.integer(6) ?? 1,
                            dueAt: row.text(7).flatMap(RFC3339Milliseconds.parse) ?? now,
                            event: StoredEvent(
                                eventID: row.text(8) ?? "", type: row.text(9) ?? "", time: row.text(10) ?? "",
                                key: row.text(11) ?? "", json: row.bytes(12) ?? []),
                            revenue: row.integer(13).map(Int64.init))
                    ))
            }
            return due
        }

        func settleUnclaimed(_ purchase: PurchaseKey, _ outcome: UnclaimedOutcome) throws {
            try connection.run(
                """
                UPDATE unclaimed_purchases SET state = ?4, settled_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                """,
                [
                    .text(purchase.app.rawValue), .text(purchase.environment.rawValue), .text(purchase.purchaseID.key),
                    .text(outcome.rawValue),
                ])
        }

        func unpublishedCredits(limit: Int) throws -> [StoredEvent] {
            var events: [StoredEvent] = []
            try connection.query(
                """
                SELECT u.event_id, u.event_type, u.event_time, u.event_key, u.event FROM unclaimed_purchases u
                    WHERE u.published = 0 AND u.state IN ('credited', 'tied') ORDER BY u.settled_at LIMIT ?1
                """, [.integer(limit)]
            ) { events.append(SQLiteLedger.event($0)) }
            return events
        }

        func storedDecision(_ key: DecisionKey) throws -> StoredEvent? {
            try SQLiteLedger.storedDecision(key, on: connection)
        }

        func untiedCredit(of purchase: PurchaseKey, transactionID: String) throws -> UntiedCredit? {
            try connection.first(
                """
                SELECT g.credit_event_id, g.original_transaction_id, g.revoked_at IS NOT NULL, g.revenue FROM grants g
                    WHERE g.app = ?1 AND g.environment = ?2 AND g.purchase_id = ?3 AND g.credit = 'unclaimed'
                """,
                [.text(purchase.app.rawValue), .text(purchase.environment.rawValue), .text(purchase.purchaseID.key)]
            ) { row in
                row.text(0).map {
                    UntiedCredit(
                        eventID: $0, originalTransactionID: row.text(1), revoked: row.integer(2) == 1,
                        revenue: row.integer(3).map(Int64.init))
                }
            } ?? nil
        }

        func creditHeld(of purchase: PurchaseKey, byOrder orderID: String) throws -> HeldCredit? {
            try connection.first(
                """
                SELECT credit_event_id, order_id, revenue FROM grants
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3 AND credit_event_id IS NOT NULL
                """,
                [.text(purchase.app.rawValue), .text(purchase.environment.rawValue), .text(purchase.purchaseID.key)]
            ) { row in
                // Bytes, as the claim compares orders.
                guard (row.text(1) ?? "").utf8.elementsEqual(orderID.utf8), let eventID = row.text(0) else {
                    return nil
                }
                return HeldCredit(eventID: eventID, revenue: row.integer(2).map(Int64.init))
            } ?? nil
        }

        func orderGranted(app: AppScope, orderID: String) throws -> Bool {
            try connection.first(
                "SELECT 1 FROM grants WHERE app = ?1 AND order_id = ?2 AND credit = 'job'",
                [.text(app.rawValue), .text(orderID)]
            ) { _ in true } ?? false
        }

        func tieCredit(of purchase: PurchaseKey, transactionID: String, to claim: GrantClaim) throws {
            let scope: [Value] = [
                .text(purchase.app.rawValue), .text(purchase.environment.rawValue), .text(purchase.purchaseID.key),
                .text(claim.orderID), .text(claim.userID),
            ]
            // The subscription's periods credited meanwhile go with it.
            try connection.run(
                """
                UPDATE grants SET order_id = ?4, user_id = ?5 WHERE app = ?1 AND environment = ?2 AND credit = 'renewal'
                    AND order_id = (SELECT order_id FROM grants WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3)
                """, scope)
            try connection.run(
                """
                UPDATE grants SET order_id = ?4, user_id = ?5, credit = 'job'
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                """, scope)
            try connection.run(
                """
                UPDATE unclaimed_purchases SET state = 'tied' WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                """, Array(scope.prefix(3)))
        }

        func insertResult(_ key: DecisionKey, event: StoredEvent) throws {
            try SQLiteLedger.insertResult(key, event: event, on: connection)
        }
    }

    // MARK: Consumption requests

    public func grant(transactionID: String, app: AppScope?) async throws -> GrantRecord? {
        try await queue.perform {
            try self.connection.first(
                Self.grantQuery
                    + """
                    , g.environment <> 'Production' FROM grants g WHERE g.transaction_id = ?1
                        AND (?2 IS NULL OR g.app = ?2)
                    UNION ALL

                    """
                    + Self.grantQuery
                        + """
                        , 2 + (g.environment <> 'Production') FROM grants g WHERE g.purchase_id = ?1
                            AND (?2 IS NULL OR g.app = ?2)
                            ORDER BY 12 LIMIT 1
                        """, [.text(transactionID), .optional(app?.rawValue)], Self.grant)
        }
    }

    public func answerConsumptionRequest(app: AppScope, environment: AppleEnvironment, transactionID: String)
        async throws
    {
        _ = try await queue.perform {
            try self.connection.run(
                """
                UPDATE consumption_requests SET answered_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                    WHERE app = ?1 AND environment = ?2 AND transaction_id = ?3
                """, [.text(app.rawValue), .text(environment.rawValue), .text(transactionID)])
        }
    }

    public func oldestOpenConsumptionRequest() async throws -> Date? {
        try await queue.perform {
            try self.connection.first(
                "SELECT min(requested_at) FROM consumption_requests WHERE answered_at IS NULL AND respond_by > ?1",
                [.text(Timestamp.rfc3339(Date()))]
            ) { $0.text(0).flatMap(RFC3339Milliseconds.parse) } ?? nil
        }
    }

    /// A grant with its order fields, its transaction's consumption deadline (`?1`: the transaction id), what its
    /// sale counted and the share refunded while it is revoked; the caller adds a rank column (the 12th),
    /// `FROM grants g` and its condition.
    private static let grantQuery = """
        SELECT g.app, g.environment, g.order_id, g.transaction_id, coalesce(g.user_id, ''), coalesce(g.product_id, ''),
            coalesce(g.quantity, 1), g.revoked_at IS NOT NULL,
            (SELECT c.respond_by FROM consumption_requests c
                WHERE c.app = g.app AND c.environment = g.environment AND c.transaction_id = ?1),
            g.revenue,
            (SELECT coalesce(s.revoked_share, 100000) FROM purchase_states s WHERE s.app = g.app
                AND s.environment = g.environment AND s.purchase_id = g.purchase_id AND s.revoked)
        """

    private static func grant(_ row: SQLiteConnection.Row) -> GrantRecord {
        let revoked = row.integer(7) == 1
        return GrantRecord(
            app: AppScope(row.text(0) ?? ""), environment: row.text(1).map(AppleEnvironment.init) ?? .production,
            orderID: row.text(2) ?? "",
            transactionID: row.text(3) ?? "", userID: row.text(4) ?? "", productID: row.text(5) ?? "",
            quantity: row.integer(6) ?? 1, revoked: revoked,
            consumptionRespondBy: row.text(8).flatMap(RFC3339Milliseconds.parse),
            revenue: row.integer(9).map(Int64.init), refundedShare: revoked ? row.integer(10) ?? 100_000 : nil)
    }

    /// A stored event from `event_id, event_type, event_time, event_key, event`.
    private static func event(_ row: SQLiteConnection.Row) -> StoredEvent {
        StoredEvent(
            eventID: row.text(0) ?? "", type: row.text(1) ?? "", time: row.text(2) ?? "", key: row.text(3) ?? "",
            json: row.bytes(4) ?? [])
    }

    // MARK: Upkeep

    public func pruneResults(decidedBefore cutoff: Date) async throws -> Int {
        // Support's credits (`support:` job ids) are kept: who credited a purchase by hand, and why, for good.
        try await pruneInBatches(
            table: "results", where: "decided_at < ?1 AND substr(job_id, 1, 8) <> 'support:'", cutoff: cutoff)
    }

    public func prune(_ retention: Retention) async throws -> [Retention.Kind: Int] {
        var deleted: [Retention.Kind: Int] = [:]
        for kind in Retention.Kind.allCases {
            guard let cutoff = retention.cutoff(kind) else { continue }
            let (table, doomed): (String, String) =
                switch kind {
                case .notifications: ("notifications", "handled_at < ?1")
                case .consumptionRequests: ("consumption_requests", "respond_by < ?1")
                case .unclaimedPurchases:
                    (
                        "unclaimed_purchases",
                        "state <> 'waiting' AND settled_at < ?1 AND (published = 1 OR state IN ('claimed', 'refunded'))"
                    )
                case .purchaseStates: ("purchase_states", "NOT revoked AND changed_at < ?1")
                }
            deleted[kind] = try await pruneInBatches(table: table, where: doomed, cutoff: cutoff)
        }
        return deleted
    }

    /// Deletes the rows of `table` that `condition` holds for (`?1`: the cutoff), 10,000 a transaction, so the
    /// one writer is never held for long. Times are RFC 3339 in UTC with milliseconds: text order is time order.
    private func pruneInBatches(table: String, where condition: String, cutoff: Date) async throws -> Int {
        let since = Timestamp.rfc3339(cutoff)
        var total = 0
        while true {
            let deleted = try await queue.perform {
                try self.checkFile()
                return try self.connection.run(
                    "DELETE FROM \(table) WHERE rowid IN (SELECT rowid FROM \(table) WHERE \(condition) LIMIT 10000)",
                    [.text(since)])
            }
            total += deleted
            if deleted < 10_000 { return total }
        }
    }

    // MARK: Offsets (OffsetStore)

    public func recordOffsets(_ offsets: [ConsumedPartition: Int64], group: String) async throws {
        guard !offsets.isEmpty else { return }
        try await queue.perform {
            try self.checkFile()
            try self.transaction {
                for (partition, offset) in offsets {
                    try self.connection.run(
                        """
                        INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES (?1, ?2, ?3, ?4)
                            ON CONFLICT (group_id, topic, partition) DO UPDATE SET
                                next_offset = max(next_offset, excluded.next_offset), recorded_at = excluded.recorded_at
                        """,
                        [
                            .text(group), .text(partition.topic), .integer(Int(partition.partition)),
                            .integer(Int(offset)),
                        ])
                }
                return ((), true)
            }
        }
    }

    public func recordedOffsets(group: String) async throws -> RecordedOffsets {
        try await queue.perform {
            var offsets: [ConsumedPartition: Int64] = [:]
            try self.connection.query(
                "SELECT topic, partition, next_offset FROM consumer_offsets WHERE group_id = ?1", [.text(group)]
            ) { row in
                let partition = ConsumedPartition(
                    topic: row.text(0) ?? "", partition: Int32(clamping: row.integer(1) ?? 0))
                offsets[partition] = Int64(row.integer(2) ?? 0)
            }
            let baseline = try self.connection.first(
                "SELECT value FROM ledger_meta WHERE key = 'offsets_baseline'"
            ) { $0.text(0) }
            return RecordedOffsets(offsets: offsets, startedEmpty: (baseline ?? nil) == "empty")
        }
    }

    /// Writes, as a decision would: a lock held by another process, a full disk or a read-only file fail
    /// here, and a ledger file deleted or replaced under the worker is refused.
    public func ping() async throws {
        try await queue.perform {
            try self.checkFile()
            try self.transaction {
                try self.connection.execute(
                    """
                    CREATE TABLE IF NOT EXISTS health (id INTEGER PRIMARY KEY, checked_at TEXT NOT NULL);
                    INSERT OR REPLACE INTO health (id, checked_at) VALUES (1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
                    """)
                return ((), true)
            }
        }
    }

    public func close() async {
        await withCheckedContinuation { continuation in
            queue.async {
                self.connection.close()
                continuation.resume()
            }
        }
    }

    /// Runs `body` in one write transaction; commits when it says so, else rolls back (a claim refused).
    private func transaction<T>(_ body: () throws -> (T, commit: Bool)) throws -> T {
        try connection.execute("BEGIN IMMEDIATE")
        do {
            let (result, commit) = try body()
            try connection.execute(commit ? "COMMIT" : "ROLLBACK")
            return result
        } catch {
            try? connection.execute("ROLLBACK")  // the original error is the one to report
            throw error
        }
    }

    /// Refuses to go on when the ledger's file is no longer the one opened (deleted, or replaced by a
    /// restore or another file): every decision from then on would be lost at the next start.
    private func checkFile() throws {
        guard let identity else { return }
        guard FileIdentity(path: path) == identity else {
            throw LedgerError(
                .replaced,
                "sqlite \(path): the ledger file was deleted or replaced; restart the worker on the right file")
        }
    }
}

private typealias Value = SQLiteConnection.Value

/// Apple gives a consumption request 12 hours from the notification.
let consumptionWindow: TimeInterval = 12 * 3600

/// A file's device and inode.
private struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}

/// The ledger's own times, `2026-11-30T17:26:36.233Z`, read by hand (a formatter per row cost more than
/// the query).
enum RFC3339Milliseconds {
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 30, bytes.last == UInt8(ascii: "Z"), bytes[4] == UInt8(ascii: "-"),
            bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
            bytes[16] == UInt8(ascii: ":")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else { return nil }
        var milliseconds = 0
        if bytes.count > 20 {
            let fraction = bytes[20..<(bytes.count - 1)]
            guard bytes[19] == UInt8(ascii: "."), (1...9).contains(fraction.count),
                let digits = number(20..<(bytes.count - 1))
            else { return nil }
            milliseconds = fraction.count >= 3 ? digits / pow10(fraction.count - 3) : digits * pow10(3 - fraction.count)
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        return Date(timeIntervalSince1970: Double(timegm(&parts)) + Double(milliseconds) / 1000)
    }

    private static func pow10(_ exponent: Int) -> Int { (0..<exponent).reduce(1) { value, _ in value * 10 } }
}
