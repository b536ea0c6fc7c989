import Foundation
import Vocabulary

/// The ledger's statements outside the claim and the notification rules, written once for both databases: stored
/// answers, a transaction's grant, support's reads, offsets, credits published, and retention.
enum LedgerQueries {
    // MARK: Stored answers

    /// A job's stored answer, with its follow-up (``ClaimRules/followUpKey(_:)``); a result stored before
    /// fingerprints (`""`) answers any content of its job id, as it did then.
    static func storedDecision(_ key: DecisionKey, in session: any SQLSession) throws -> StoredEvent? {
        answer(key, among: try storedResults(key, in: session).map { ($0.text(0) ?? "", $0.event(from: 1)) })
    }

    /// A job's stored results that may answer it (its fingerprint, none, its follow-up's): the fingerprint, then
    /// the event's columns.
    static func storedResults(_ key: DecisionKey, in session: any SQLSession) throws -> [SQLRow] {
        try session.rows(
            ClaimSQL.of(session.spelling).storedResults,
            [
                .text(key.app.rawValue), .text(key.jobID), .text(key.fingerprint),
                .text(ClaimRules.followUpKey(key).fingerprint),
            ])
    }

    /// The answer of `key` among a job's stored rows (fingerprint, event): its own, else one stored before
    /// fingerprints; with its follow-up.
    static func answer(_ key: DecisionKey, among rows: [(fingerprint: String, event: StoredEvent)]) -> StoredEvent? {
        func row(_ fingerprint: String) -> StoredEvent? {
            rows.first { $0.fingerprint.utf8.elementsEqual(fingerprint.utf8) }?.event
        }
        guard var stored = row(key.fingerprint) ?? row("") else { return nil }
        if let followUp = row(ClaimRules.followUpKey(key).fingerprint) { stored.followUps = [followUp] }
        return stored
    }

    static func insertResult(_ key: DecisionKey, event: StoredEvent, in session: any SQLSession) throws {
        try session.rows(
            ClaimSQL.of(session.spelling).insertResult,
            [
                .text(key.app.rawValue), .text(key.jobID), .text(key.fingerprint), .text(event.eventID),
                .text(event.type), .text(event.time), .text(event.key), .bytes(event.json),
            ])
    }

    /// Whether the purchase was given back (a refund reversed) at or after `at`: a refund a proof states of that time
    /// is over.
    static func reversed(
        _ purchase: PurchaseKey, transactionID: String, since at: Date, in session: any SQLSession
    ) throws -> Bool {
        try session.first(
            """
            SELECT 1 FROM \(session.spelling.table("purchase_states")) WHERE app = ?1 AND environment = ?2
                AND purchase_id IN (?3, ?4) AND NOT revoked AND changed_at >= \(session.spelling.time(5))
            """,
            [
                .text(purchase.app.rawValue), .text(purchase.environment.rawValue), .text(purchase.purchaseID.key),
                .text(transactionID), .time(at),
            ]) != nil
    }

    /// A prorated refund a proof stated, remembered as a refund notification makes it (revoked, its share and
    /// Apple's time), unless the purchase's state is newer.
    static func rememberRefund(
        _ purchase: PurchaseKey, transactionID: String, _ refund: RefundTaken, in session: any SQLSession
    ) throws {
        try session.rows(
            """
            INSERT INTO \(session.spelling.table("purchase_states")) AS s (app, environment, purchase_id, transaction_id,
                revoked, changed_at, revoked_share) VALUES (?1, ?2, ?3, ?4, TRUE, \(session.spelling.time(5)), ?6)
                ON CONFLICT (app, environment, purchase_id) DO UPDATE SET transaction_id = excluded.transaction_id,
                    revoked = TRUE, changed_at = excluded.changed_at, revoked_share = excluded.revoked_share
                    WHERE s.changed_at < excluded.changed_at
            """,
            [
                .text(purchase.app.rawValue), .text(purchase.environment.rawValue), .text(purchase.purchaseID.key),
                .text(transactionID), .time(refund.at), .integer(refund.share),
            ])
    }

    // MARK: Grants

    /// A grant with its order fields, its transaction's consumption deadline (`?1`: the transaction id), what its
    /// sale counted and the share refunded while it is revoked: 11 columns, read by ``grant(_:)``; the caller adds
    /// a rank column (the 12th), `FROM grants g` and its condition.
    static func grantColumns(_ spelling: SQLSpelling) -> String {
        """
        SELECT g.app, g.environment, g.order_id, g.transaction_id, coalesce(g.user_id, ''), coalesce(g.product_id, ''),
            coalesce(g.quantity, 1), g.revoked_at IS NOT NULL,
            (SELECT \(spelling.readTime("c.respond_by")) FROM \(spelling.table("consumption_requests")) c
                WHERE c.app = g.app AND c.environment = g.environment AND c.transaction_id = ?1),
            g.revenue,
            (SELECT coalesce(s.revoked_share, 100000) FROM \(spelling.table("purchase_states")) s WHERE s.app = g.app
                AND s.environment = g.environment AND s.purchase_id = g.purchase_id AND s.revoked)
        """
    }

    static func grant(_ row: SQLRow) -> GrantRecord {
        let revoked = row.bool(7)
        return GrantRecord(
            app: AppScope(row.text(0) ?? ""), environment: row.text(1).map(AppleEnvironment.init) ?? .production,
            orderID: row.text(2) ?? "", transactionID: row.text(3) ?? "", userID: row.text(4) ?? "",
            productID: row.text(5) ?? "", quantity: row.int(6) ?? 1, revoked: revoked,
            consumptionRespondBy: row.time(8), revenue: row.int64(9),
            refundedShare: revoked ? row.int(10) ?? 100_000 : nil)
    }

    /// The grant of a transaction (by its id, or as a purchase's identity), in `app` when given, else in any app;
    /// Production first.
    static func grant(transactionID: String, app: AppScope?, in session: any SQLSession) throws -> GrantRecord? {
        let grants = session.spelling.table("grants")
        let inApp = app == nil ? "" : " AND g.app = ?2"
        return try session.first(
            grantColumns(session.spelling) + ", CASE WHEN g.environment = 'Production' THEN 0 ELSE 1 END"
                + " FROM \(grants) g WHERE g.transaction_id = ?1\(inApp) UNION ALL "
                + grantColumns(session.spelling) + ", CASE WHEN g.environment = 'Production' THEN 2 ELSE 3 END"
                + " FROM \(grants) g WHERE g.purchase_id = ?1\(inApp) ORDER BY 12 LIMIT 1",
            [.text(transactionID)] + (app.map { [SQLValue.text($0.rawValue)] } ?? [])
        ).map(grant)
    }

    // MARK: Consumption requests

    static func answerConsumptionRequest(
        app: AppScope, environment: AppleEnvironment, transactionID: String, in session: any SQLSession
    ) throws {
        try session.rows(
            """
            UPDATE \(session.spelling.table("consumption_requests")) SET answered_at = \(session.spelling.now)
                WHERE app = ?1 AND environment = ?2 AND transaction_id = ?3
            """, [.text(app.rawValue), .text(environment.rawValue), .text(transactionID)])
    }

    /// Per app: the open requests are few (a deadline of 12 hours), read by the deadline's index.
    static func oldestOpenConsumptionRequests(now: Date, in session: any SQLSession) throws -> [AppScope: Date] {
        let spelling = session.spelling
        let rows = try session.rows(
            """
            SELECT app, \(spelling.readTime("min(requested_at)")) FROM \(spelling.table("consumption_requests"))
                WHERE answered_at IS NULL AND respond_by > \(spelling.time(1)) GROUP BY app
            """, [.time(now)])
        return Dictionary(
            rows.compactMap { row in row.time(1).map { (AppScope(row.text(0) ?? ""), $0) } }, uniquingKeysWith: min)
    }

    // MARK: Purchases no job claimed

    static func markCreditsPublished(eventIDs: [String], in session: any SQLSession) throws {
        guard !eventIDs.isEmpty else { return }
        let list = (1...eventIDs.count).map { "?\($0)" }.joined(separator: ", ")
        try session.rows(
            """
            UPDATE \(session.spelling.table("unclaimed_purchases")) SET published = TRUE
                WHERE event_id IN (\(list)) AND NOT published
            """, eventIDs.map(SQLValue.text))
    }

    /// Reported purchases waiting for a job or their time: claimed by a job before their time, not waiting any
    /// more, though settled only then.
    static func waitingUnclaimed(in session: any SQLSession) throws -> Int {
        let spelling = session.spelling
        return try session.first(
            """
            SELECT count(*) FROM \(spelling.table("unclaimed_purchases")) u WHERE u.state = 'waiting' AND NOT EXISTS
                (SELECT 1 FROM \(spelling.table("grants")) g WHERE g.app = u.app AND g.environment = u.environment
                    AND g.purchase_id = u.purchase_id)
            """, []
        )?.int(0) ?? 0
    }

    // MARK: Support

    static func supportRecord(
        app: AppScope, environment: AppleEnvironment, purchaseID: PurchaseID, transactionID: String,
        in session: any SQLSession
    ) throws -> SupportRecord {
        let spelling = session.spelling
        let grants = spelling.table("grants")
        let columns = """
            SELECT order_id, coalesce(user_id, ''), transaction_id, \(spelling.readTime("granted_at")),
                \(spelling.readTime("revoked_at")), credit
            """
        let key: [SQLValue] = [
            .text(app.rawValue), .text(environment.rawValue), .text(purchaseID.key), .text(transactionID),
        ]
        let grant = try session.first(
            """
            \(columns), 0 FROM \(grants) WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
            UNION ALL
            \(columns), 1 FROM \(grants) WHERE app = ?1 AND environment = ?2 AND transaction_id = ?4
            ORDER BY 7 LIMIT 1
            """, key
        ).map { row in
            SupportRecord.Grant(
                orderID: row.text(0) ?? "", userID: row.text(1) ?? "", transactionID: row.text(2) ?? "",
                grantedAt: row.time(3), revokedAt: row.time(4), credit: row.text(5).map(GrantKind.init) ?? .job)
        }
        let report = try session.first(
            """
            SELECT state, \(spelling.readTime("due_at")), event_id, published, \(spelling.readTime("settled_at"))
                FROM \(spelling.table("unclaimed_purchases")) WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
            """, Array(key.prefix(3))
        ).map { row in
            SupportRecord.Report(
                state: row.text(0) ?? "", dueAt: row.time(1), eventID: row.text(2) ?? "", published: row.bool(3),
                settledAt: row.time(4))
        }
        return SupportRecord(grant: grant, report: report)
    }

    /// By the grants' two order indexes (a job's, a renewal's), never a scan: the newest 100, newest last.
    static func grantedTransactions(orderID: String, app: AppScope, in session: any SQLSession) throws
        -> [(AppleEnvironment, String)]
    {
        let grants = session.spelling.table("grants")
        return try session.rows(
            """
            SELECT environment, transaction_id, granted_at FROM \(grants) WHERE app = ?1 AND order_id = ?2 AND credit = 'job'
            UNION ALL
            SELECT environment, transaction_id, granted_at FROM \(grants) WHERE app = ?1 AND order_id = ?2
                AND credit = 'renewal'
            ORDER BY 3 DESC LIMIT 100
            """, [.text(app.rawValue), .text(orderID)]
        ).map { (AppleEnvironment(rawValue: $0.text(0) ?? ""), $0.text(1) ?? "") }.reversed()
    }

    /// A scan of the reports kept (retention prunes them): for a support desk, not for a job's path.
    static func reportedTransactions(appAccountToken: String, app: AppScope, in session: any SQLSession) throws
        -> [(AppleEnvironment, String)]
    {
        let spelling = session.spelling
        return try session.rows(
            """
            SELECT environment, transaction_id FROM \(spelling.table("unclaimed_purchases"))
                WHERE app = ?1 AND state IN ('waiting', 'credited')
                    AND \(spelling.eventMember("event", "app_account_token")) = ?2
                ORDER BY reported_at LIMIT 100
            """, [.text(app.rawValue), .text(appAccountToken)]
        ).map { (AppleEnvironment(rawValue: $0.text(0) ?? ""), $0.text(1) ?? "") }
    }

    // MARK: Offsets

    /// One statement for every partition: a commit round costs one write, whatever the assignment. An offset
    /// never moves back.
    static func recordOffsets(_ offsets: [ConsumedPartition: Int64], group: String, in session: any SQLSession)
        throws
    {
        guard !offsets.isEmpty else { return }
        let entries = Array(offsets)
        let rows = entries.indices.map { index in
            "(?1, ?\(index * 3 + 2), ?\(index * 3 + 3), ?\(index * 3 + 4), \(session.spelling.now))"
        }
        try session.rows(
            """
            INSERT INTO \(session.spelling.table("consumer_offsets")) AS o (group_id, topic, partition, next_offset,
                recorded_at) VALUES \(rows.joined(separator: ", "))
                ON CONFLICT (group_id, topic, partition) DO UPDATE SET next_offset = CASE
                    WHEN excluded.next_offset > o.next_offset THEN excluded.next_offset ELSE o.next_offset END,
                    recorded_at = excluded.recorded_at
            """,
            [.text(group)]
                + entries.flatMap {
                    [SQLValue.text($0.key.topic), .integer(Int64($0.key.partition)), .integer($0.value)]
                })
    }

    /// The ledger keeps the bundle id of its default app (whose rows have app ""): opened with another
    /// `apple.bundle_id` (a typo, another game's configuration), the default app's history would be read as
    /// another app's, and its purchases could be granted again. Recorded on first use; a mismatch is refused.
    static func checkDefaultApp(_ bundleID: String?, in session: any SQLSession) throws {
        guard let bundleID else { return }
        let table = session.spelling.table("ledger_meta")
        if let recorded = try session.first("SELECT value FROM \(table) WHERE key = 'default_app'", [])?.text(0) {
            guard recorded == bundleID else {
                throw LedgerError.defaultAppMismatch(recorded: recorded, configured: bundleID)
            }
            return
        }
        try session.rows(
            "INSERT INTO \(table) (key, value) VALUES ('default_app', ?1) ON CONFLICT DO NOTHING", [.text(bundleID)])
    }

    static func recordedOffsets(group: String, in session: any SQLSession) throws -> RecordedOffsets {
        var offsets: [ConsumedPartition: Int64] = [:]
        for row in try session.rows(
            "SELECT topic, partition, next_offset FROM \(session.spelling.table("consumer_offsets")) WHERE group_id = ?1",
            [.text(group)])
        {
            guard let topic = row.text(0), let partition = row.int64(1), let offset = row.int64(2) else { continue }
            offsets[ConsumedPartition(topic: topic, partition: Int32(clamping: partition))] = offset
        }
        let baseline = try session.first(
            "SELECT value FROM \(session.spelling.table("ledger_meta")) WHERE key = 'offsets_baseline'", [])
        return RecordedOffsets(offsets: offsets, startedEmpty: baseline?.text(0) == "empty")
    }

    // MARK: Retention

    /// What each kind of retention deletes: its table and condition (`?1`: the cutoff, a time).
    static func doomed(_ kind: Retention.Kind, _ spelling: SQLSpelling) -> (table: String, condition: String) {
        let cutoff = spelling.time(1)
        return switch kind {
        case .notifications: ("notifications", "handled_at < \(cutoff)")
        case .consumptionRequests: ("consumption_requests", "respond_by < \(cutoff)")
        case .unclaimedPurchases:
            (
                "unclaimed_purchases",
                "state <> 'waiting' AND settled_at < \(cutoff) AND (published OR state IN ('claimed', 'refunded'))"
            )
        case .purchaseStates: ("purchase_states", "NOT revoked AND changed_at < \(cutoff)")
        }
    }

    /// Stored results decided before the cutoff; support's credits (`support:` job ids) are kept: who credited a
    /// purchase by hand, and why, for good. Compared byte for byte (SQLite's LIKE ignores case).
    static func doomedResults(_ spelling: SQLSpelling) -> (table: String, condition: String) {
        ("results", "decided_at < \(spelling.time(1)) AND substr(job_id, 1, 8) <> '\(SupportJobID.prefix)'")
    }

    /// Deletes at most 10,000 rows of `table` that `condition` holds for, under the prune lock (one replica
    /// prunes at a time: the others get nil at once). Bounded transactions: a year's backlog never holds a lock
    /// or a WAL burst for long.
    static func pruneBatch(table: String, condition: String, cutoff: Date, in session: any SQLSession) throws -> Int? {
        guard try session.tryLock(pruneLock) else { return nil }
        let name = session.spelling.table(table)
        let rowID = session.spelling.rowID
        return try session.rows(
            """
            DELETE FROM \(name) WHERE \(rowID) IN (SELECT \(rowID) FROM \(name) WHERE \(condition) LIMIT 10000)
                RETURNING 1
            """, [.time(cutoff)]
        ).count
    }

    /// The lock pruning takes (a try-lock): of many replicas, one prunes at a time.
    static let pruneLock = 7_261_116
}
