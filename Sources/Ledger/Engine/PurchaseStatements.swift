import Foundation
import Vocabulary

/// ``PurchaseRules``' statements, written once for both databases (``SQLSession``). Each key an index's: a
/// purchase by its identity or its transaction id is read as a `UNION ALL` of exact keys, never an `OR` of
/// columns (SQLite read every grant of the app and environment for one: 23 times slower at 20,000 grants).
struct PurchaseStatements: PurchaseStateTransaction {
    let session: any SQLSession
    var spelling: SQLSpelling { session.spelling }

    private func table(_ name: String) -> String { spelling.table(name) }

    func storedNotification(id: String) throws -> HandledNotification? {
        try session.first(
            "SELECT event_id, event_type, event_time, event_key, event FROM \(table("notifications")) WHERE notification_id = ?1",
            [.text(id)]
        ).map { row in HandledNotification(event: row.bytes(4) == nil ? nil : row.event()) }
    }

    func lock(_ purchase: PurchaseKey) throws {
        try session.lock(Self.lockKey(purchase))
    }

    /// The key of a purchase's lock: the claim and every notification take the same one.
    static func lockKey(_ purchase: PurchaseKey) -> String {
        purchase.app.rawValue + "\u{1}" + purchase.environment.rawValue + "\u{1}" + purchase.purchaseID.key
    }

    func grant(of purchase: PurchaseKey, transactionID: String) throws -> GrantRecord? {
        try session.first(
            LedgerQueries.grantColumns(spelling) + ", 0 FROM \(table("grants")) g"
                + " WHERE g.app = ?2 AND g.environment = ?3 AND g.transaction_id = ?1 UNION ALL "
                + LedgerQueries.grantColumns(spelling) + ", 1 FROM \(table("grants")) g"
                + " WHERE g.app = ?2 AND g.environment = ?3 AND g.purchase_id IN (?1, ?4) ORDER BY 12 LIMIT 1",
            [
                .text(transactionID), .text(purchase.app.rawValue), .text(purchase.environment.rawValue),
                .text(purchase.purchaseID.key),
            ]
        ).map(LedgerQueries.grant)
    }

    func state(of purchase: PurchaseKey) throws -> PurchaseState? {
        try session.first(
            """
            SELECT revoked, \(spelling.readTime("changed_at")), revoked_share FROM \(table("purchase_states"))
                WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3\(spelling.forUpdate)
            """, key(purchase)
        ).flatMap { row in row.time(1).map { PurchaseState(revoked: row.bool(0), at: $0, share: row.int(2)) } }
    }

    func subscriptionGrant(app: AppScope, environment: AppleEnvironment, originalTransactionID: String) throws
        -> GrantRecord?
    {
        // The first grant of the subscription: of its original transaction, else the oldest of its periods.
        try session.first(
            LedgerQueries.grantColumns(spelling) + ", 0, NULL FROM \(table("grants")) g"
                + " WHERE g.app = ?2 AND g.environment = ?3 AND g.transaction_id = ?1 UNION ALL "
                + LedgerQueries.grantColumns(spelling) + ", 1, g.granted_at FROM \(table("grants")) g"
                + " WHERE g.app = ?2 AND g.environment = ?3 AND g.original_transaction_id = ?1 ORDER BY 12, 13 LIMIT 1",
            [.text(originalTransactionID), .text(app.rawValue), .text(environment.rawValue)]
        ).map(LedgerQueries.grant)
    }

    func subscriptionState(app: AppScope, environment: AppleEnvironment, originalTransactionID: String) throws
        -> SubscriptionState?
    {
        try session.first(
            """
            SELECT status, \(spelling.readTime("expires_at")), \(spelling.readTime("grace_period_expires_at")),
                auto_renew, auto_renew_product_id, \(spelling.readTime("changed_at"))
                FROM \(table("subscriptions")) WHERE app = ?1 AND environment = ?2 AND original_transaction_id = ?3
            """, [.text(app.rawValue), .text(environment.rawValue), .text(originalTransactionID)]
        ).flatMap { row -> SubscriptionState? in
            guard let changedAt = row.time(5) else { return nil }
            return SubscriptionState(
                status: row.text(0).map(SubscriptionStatus.init) ?? .active, expiresAt: row.time(1),
                gracePeriodExpiresAt: row.time(2),
                autoRenew: row.text(3) == nil ? nil : row.bool(3), autoRenewProductID: row.text(4),
                changedAt: changedAt)
        }
    }

    func setSubscriptionState(
        app: AppScope, environment: AppleEnvironment, originalTransactionID: String, _ state: SubscriptionState
    ) throws {
        try session.rows(
            """
            INSERT INTO \(table("subscriptions")) (app, environment, original_transaction_id, status, expires_at,
                grace_period_expires_at, auto_renew, auto_renew_product_id, changed_at)
                VALUES (?1, ?2, ?3, ?4, \(spelling.time(5)), \(spelling.time(6)), ?7, ?8, \(spelling.time(9)))
                ON CONFLICT (app, environment, original_transaction_id) DO UPDATE SET status = excluded.status,
                    expires_at = excluded.expires_at, grace_period_expires_at = excluded.grace_period_expires_at,
                    auto_renew = excluded.auto_renew, auto_renew_product_id = excluded.auto_renew_product_id,
                    changed_at = excluded.changed_at
            """,
            [
                .text(app.rawValue), .text(environment.rawValue), .text(originalTransactionID),
                .text(state.status.rawValue),
                .optional(state.expiresAt), .optional(state.gracePeriodExpiresAt),
                state.autoRenew.map(SQLValue.bool) ?? .null, .optional(state.autoRenewProductID),
                .time(state.changedAt),
            ])
    }

    func insertCredit(_ credit: Credit) throws -> Bool {
        !(try session.rows(
            """
            INSERT INTO \(table("grants")) (app, environment, transaction_id, order_id, purchase_id, user_id, product_id,
                quantity, credit, original_transaction_id, credit_event_id, revenue)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT DO NOTHING RETURNING 1
            """,
            [
                .text(credit.purchase.app.rawValue), .text(credit.purchase.environment.rawValue),
                .text(credit.transactionID), .text(credit.orderID), .text(credit.purchase.purchaseID.key),
                .text(credit.userID), .text(credit.productID), .integer(credit.quantity), .text(credit.kind.rawValue),
                .optional(credit.originalTransactionID), .text(credit.eventID), .optional(credit.revenue),
            ]
        ).isEmpty)
    }

    func dueUnclaimed(now: Date, limit: Int) throws -> [(AppScope, AppleEnvironment, ReportedPurchase)] {
        try session.rows(
            """
            SELECT app, environment, purchase_id, transaction_id, original_transaction_id, product_id, quantity,
                \(spelling.readTime("due_at")), event_id, event_type, event_time, event_key, event, revenue
                FROM \(table("unclaimed_purchases")) WHERE state = 'waiting' AND due_at <= \(spelling.time(1))
                ORDER BY due_at LIMIT ?2\(spelling.forUpdateSkipLocked)
            """, [.time(now), .integer(limit)]
        ).map { row in
            (
                AppScope(row.text(0) ?? ""), AppleEnvironment(rawValue: row.text(1) ?? ""),
                ReportedPurchase(
                    purchaseID: PurchaseID(key: row.text(2) ?? ""), transactionID: row.text(3) ?? "",
                    originalTransactionID: row.text(4), productID: row.text(5) ?? "", quantity: row.int(6) ?? 1,
                    dueAt: row.time(7) ?? now, event: row.event(from: 8), revenue: row.int64(13))
            )
        }
    }

    func settleUnclaimed(_ purchase: PurchaseKey, _ outcome: UnclaimedEnding) throws {
        try session.rows(
            """
            UPDATE \(table("unclaimed_purchases")) SET state = ?4, settled_at = \(spelling.now)
                WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
            """, key(purchase) + [.text(outcome.rawValue)])
    }

    func unpublishedCredits(limit: Int) throws -> [StoredEvent] {
        try session.rows(
            """
            SELECT event_id, event_type, event_time, event_key, event FROM \(table("unclaimed_purchases"))
                WHERE NOT published AND state IN ('credited', 'tied') ORDER BY settled_at LIMIT ?1
            """, [.integer(limit)]
        ).map { $0.event() }
    }

    func storedDecision(_ key: DecisionKey) throws -> StoredEvent? {
        try LedgerQueries.storedDecision(key, in: session)
    }

    func untiedCredit(of purchase: PurchaseKey, transactionID: String) throws -> UntiedCredit? {
        let states = table("purchase_states")
        let state =
            "FROM \(states) s WHERE s.app = g.app AND s.environment = g.environment AND s.purchase_id = g.purchase_id"
        return try session.first(
            """
            SELECT g.credit_event_id, g.original_transaction_id, g.revoked_at IS NOT NULL, g.revenue,
                (SELECT s.revoked_share \(state) AND s.revoked), (SELECT \(spelling.readTime("s.changed_at")) \(state))
                FROM \(table("grants")) g
                WHERE g.app = ?1 AND g.environment = ?2 AND g.purchase_id = ?3 AND g.credit = 'unclaimed'
            """, key(purchase)
        ).flatMap { row in
            row.text(0).map {
                UntiedCredit(
                    eventID: $0, originalTransactionID: row.text(1), revoked: row.bool(2), revenue: row.int64(3),
                    refund: row.int(4).map { RefundTaken(share: $0, at: row.time(5) ?? Date(timeIntervalSince1970: 0)) }
                )
            }
        }
    }

    func creditHeld(of purchase: PurchaseKey, byOrder orderID: String) throws -> HeldCredit? {
        try session.first(
            """
            SELECT credit_event_id, order_id, revenue FROM \(table("grants"))
                WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3 AND credit_event_id IS NOT NULL
            """, key(purchase)
        ).flatMap { row in
            // Bytes, as the claim compares orders.
            guard (row.text(1) ?? "").utf8.elementsEqual(orderID.utf8), let eventID = row.text(0) else { return nil }
            return HeldCredit(eventID: eventID, revenue: row.int64(2))
        }
    }

    func orderGranted(app: AppScope, orderID: String) throws -> Bool {
        try session.first(
            "SELECT 1 FROM \(table("grants")) WHERE app = ?1 AND order_id = ?2 AND credit = 'job'",
            [.text(app.rawValue), .text(orderID)]) != nil
    }

    func tieCredit(of purchase: PurchaseKey, transactionID: String, to claim: GrantClaim) throws {
        let grants = table("grants")
        let scope = key(purchase) + [.text(claim.orderID), .text(claim.userID)]
        // The subscription's periods credited meanwhile go with it.
        try session.rows(
            """
            UPDATE \(grants) SET order_id = ?4, user_id = ?5 WHERE app = ?1 AND environment = ?2 AND credit = 'renewal'
                AND order_id = (SELECT order_id FROM \(grants) WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3)
            """, scope)
        try session.rows(
            """
            UPDATE \(grants) SET order_id = ?4, user_id = ?5, credit = 'job'
                WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
            """, scope)
        try session.rows(
            """
            UPDATE \(table("unclaimed_purchases")) SET state = 'tied'
                WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
            """, key(purchase))
    }

    func insertResult(_ key: DecisionKey, event: StoredEvent) throws {
        try LedgerQueries.insertResult(key, event: event, in: session)
    }

    // MARK: The writes the rules decide

    /// A notification handled, with the event it published (nil: none), and what it came from (nil: Apple).
    func notification(id: String, event: StoredEvent?, source: String?) -> SQLStatement {
        SQLStatement(
            """
            INSERT INTO \(table("notifications")) (notification_id, event_id, event_type, event_time, event_key, event,
                source) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
            """,
            [
                .text(id), .optional(event?.eventID), .optional(event?.type), .optional(event?.time),
                .optional(event?.key), event.map { .bytes($0.json) } ?? .null, .optional(source),
            ])
    }

    /// A write's statements, none reading what another writes (``SQLSession/run(_:)``).
    func statements(for write: PurchaseWrite) -> [SQLStatement] {
        switch write {
        case .state(let purchase, let transactionID, let revoked, let at, let share):
            let grants = table("grants")
            return [
                SQLStatement(
                    """
                    INSERT INTO \(table("purchase_states")) (app, environment, purchase_id, transaction_id, revoked,
                        changed_at, revoked_share) VALUES (?1, ?2, ?3, ?4, ?5, \(spelling.time(6)), ?7)
                        ON CONFLICT (app, environment, purchase_id) DO UPDATE SET
                            transaction_id = excluded.transaction_id, revoked = excluded.revoked,
                            changed_at = excluded.changed_at, revoked_share = excluded.revoked_share
                    """,
                    key(purchase) + [.text(transactionID), .bool(revoked), .time(at), .optional(share.map(Int64.init))]),
                // The purchase's grants revoked (keeping the first revocation's time), or not.
                SQLStatement(
                    "UPDATE \(grants) SET revoked_at = "
                        + (revoked ? "coalesce(revoked_at, \(spelling.now))" : "NULL")
                        + " WHERE \(spelling.rowID) IN (SELECT \(spelling.rowID) FROM \(grants) WHERE app = ?1"
                        + " AND environment = ?2 AND purchase_id IN (?3, ?4) UNION ALL SELECT \(spelling.rowID)"
                        + " FROM \(grants) WHERE app = ?1 AND environment = ?2 AND transaction_id = ?4)",
                    key(purchase) + [.text(transactionID)]),
            ]
        case .consumptionRequest(let app, let environment, let transactionID, let notificationID, let respondBy):
            // Opened, or opened again; a request delivered late (a backfill) never moves a newer one's deadline back.
            // Opened again, it is a new request: an answer received for the one before does not answer it.
            return [
                SQLStatement(
                    """
                    INSERT INTO \(table("consumption_requests")) AS c (app, environment, transaction_id,
                        notification_id, respond_by, requested_at)
                        VALUES (?1, ?2, ?3, ?4, \(spelling.time(5)), \(spelling.time(6)))
                        ON CONFLICT (app, environment, transaction_id) DO UPDATE SET
                            notification_id = excluded.notification_id, respond_by = excluded.respond_by,
                            requested_at = excluded.requested_at, answered_at = NULL, answer_received_at = NULL
                            WHERE c.respond_by < excluded.respond_by
                    """,
                    [
                        .text(app.rawValue), .text(environment.rawValue), .text(transactionID), .text(notificationID),
                        .time(respondBy), .time(respondBy.addingTimeInterval(-consumptionWindow)),
                    ])
            ]
        case .waitUnclaimed(let app, let environment, let reported):
            // Kept once: a second report changes nothing.
            let event = reported.event
            return [
                SQLStatement(
                    """
                    INSERT INTO \(table("unclaimed_purchases")) (app, environment, purchase_id, transaction_id,
                        original_transaction_id, product_id, quantity, due_at, event_id, event_type, event_time,
                        event_key, event, revenue)
                        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, \(spelling.time(8)), ?9, ?10, ?11, ?12, ?13, ?14)
                        ON CONFLICT DO NOTHING
                    """,
                    [
                        .text(app.rawValue), .text(environment.rawValue), .text(reported.purchaseID.key),
                        .text(reported.transactionID), .optional(reported.originalTransactionID),
                        .text(reported.productID), .integer(reported.quantity), .time(reported.dueAt),
                        .text(event.eventID), .text(event.type), .text(event.time), .text(event.key),
                        .bytes(event.json), .optional(reported.revenue),
                    ])
            ]
        case .reopenUnclaimed(let purchase):
            // Only a credit withheld for the refund: one claimed or credited stays as it ended. Its due time has
            // passed, so the next round of credits takes it.
            return [
                SQLStatement(
                    """
                    UPDATE \(table("unclaimed_purchases")) SET state = 'waiting', settled_at = NULL
                        WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3 AND state = 'refunded'
                    """, key(purchase))
            ]
        }
    }

    /// A purchase's key as the first three parameters.
    private func key(_ purchase: PurchaseKey) -> [SQLValue] {
        [.text(purchase.app.rawValue), .text(purchase.environment.rawValue), .text(purchase.purchaseID.key)]
    }
}
