import Foundation
import LedgerDomain
import Vocabulary

/// A player's data request (``PlayerRecords``), read in one transaction on either database: the grants by the
/// player index; each grant's refund, subscription, refund request and Apple's report by their keys; the answers
/// and the notifications' events that name the player by scans of what retention keeps; credits held and audit
/// lines by their player columns. Newest first. On PostgreSQL the role must read the desk's tables: the desk's.
enum PlayerQueries {
    static func records(_ userID: String, app: AppScope, limit: Int, in session: any SQLSession) throws
        -> PlayerRecords
    {
        let spelling = session.spelling
        let bound = max(1, min(limit, 10_000))
        var records = PlayerRecords()
        records.grants = try session.rows(
            """
            SELECT environment, transaction_id, original_transaction_id, order_id, purchase_id, product_id, quantity,
                credit, \(spelling.readTime("granted_at")), \(spelling.readTime("revoked_at")), revenue, event
                FROM \(spelling.table("grants")) WHERE app = ?1 AND user_id = ?2 ORDER BY granted_at DESC LIMIT ?3
            """, [.text(app.rawValue), .text(userID), .integer(bound)]
        ).map { row in
            PlayerRecords.Grant(
                environment: AppleEnvironment(rawValue: row.text(0) ?? ""), transactionID: row.text(1) ?? "",
                originalTransactionID: row.text(2), orderID: row.text(3) ?? "", purchaseID: row.text(4) ?? "",
                productID: row.text(5), quantity: row.int(6), credit: row.text(7) ?? "job", grantedAt: row.time(8),
                revokedAt: row.time(9), revenue: row.int64(10), event: row.bytes(11))
        }
        var subscriptions = Set<String>()
        for grant in records.grants {
            let keys: [SQLValue] = [.text(app.rawValue), .text(grant.environment.rawValue)]
            if let row = try session.first(
                """
                SELECT revoked, revoked_share, \(spelling.readTime("changed_at")) FROM \(spelling.table("purchase_states"))
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                """, keys + [.text(grant.purchaseID)])
            {
                records.refunds.append(
                    PlayerRecords.Refund(
                        environment: grant.environment, transactionID: grant.transactionID, revoked: row.bool(0),
                        share: row.int(1), changedAt: row.time(2)))
            }
            if let row = try session.first(
                """
                SELECT \(spelling.readTime("requested_at")), \(spelling.readTime("respond_by")),
                    \(spelling.readTime("answered_at")) FROM \(spelling.table("consumption_requests"))
                    WHERE app = ?1 AND environment = ?2 AND transaction_id = ?3
                """, keys + [.text(grant.transactionID)])
            {
                records.refundRequests.append(
                    PlayerRecords.RefundRequest(
                        environment: grant.environment, transactionID: grant.transactionID, requestedAt: row.time(0),
                        respondBy: row.time(1), answeredAt: row.time(2)))
            }
            let original = grant.originalTransactionID ?? grant.transactionID
            guard subscriptions.insert("\(grant.environment.rawValue)/\(original)").inserted,
                let row = try session.first(
                    """
                    SELECT status, \(spelling.readTime("expires_at")), auto_renew, auto_renew_product_id,
                        \(spelling.readTime("changed_at")) FROM \(spelling.table("subscriptions"))
                        WHERE app = ?1 AND environment = ?2 AND original_transaction_id = ?3
                    """, keys + [.text(original)])
            else { continue }
            records.subscriptions.append(
                PlayerRecords.SubscriptionRecord(
                    environment: grant.environment, originalTransactionID: original, status: row.text(0) ?? "",
                    expiresAt: row.time(1), autoRenew: row.text(2) == nil ? nil : row.bool(2),
                    autoRenewProductID: row.text(3), changedAt: row.time(4)))
        }
        records.answers = try session.rows(
            """
            SELECT job_id, \(spelling.readTime("decided_at")), event FROM \(spelling.table("results"))
                WHERE app = ?1 AND \(spelling.eventMember("event", "user_id")) = ?2 ORDER BY decided_at DESC LIMIT ?3
            """, [.text(app.rawValue), .text(userID), .integer(bound)]
        ).map { PlayerRecords.Stored(id: $0.text(0) ?? "", at: $0.time(1), state: "", event: $0.bytes(2) ?? []) }
        // Apple's reports of the player's purchases, by the grants' keys. A purchase reported with a token the player
        // used, that no job of theirs claimed, is not shown: a token is the app's to set, and may be another's.
        for grant in records.grants {
            if let row = try session.first(
                """
                SELECT transaction_id, \(spelling.readTime("reported_at")), state, event
                    FROM \(spelling.table("unclaimed_purchases"))
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                """, [.text(app.rawValue), .text(grant.environment.rawValue), .text(grant.purchaseID)])
            {
                records.reported.append(
                    PlayerRecords.Stored(
                        id: row.text(0) ?? "", at: row.time(1), state: row.text(2) ?? "", event: row.bytes(3) ?? []))
            }
        }
        records.notices = try session.rows(
            """
            SELECT notification_id, \(spelling.readTime("handled_at")), event FROM \(spelling.table("notifications"))
                WHERE \(spelling.eventMember("event", "user_id")) = ?1 ORDER BY handled_at DESC LIMIT ?2
            """, [.text(userID), .integer(bound)]
        ).map { PlayerRecords.Stored(id: $0.text(0) ?? "", at: $0.time(1), state: "", event: $0.bytes(2) ?? []) }
        records.heldCredits = try session.rows(
            """
            SELECT id, \(spelling.readTime("created_at")), status, request, app FROM \(spelling.table("desk_approvals"))
                WHERE player = ?1 ORDER BY id DESC LIMIT ?2
            """, [.text(userID), .integer(bound)]
        ).map {
            PlayerRecords.Stored(
                id: $0.text(0) ?? "", at: $0.time(1), state: $0.text(2) ?? "", event: $0.bytes(3) ?? [],
                app: $0.text(4) ?? "")
        }
        // The audit names a player by their user id in every app of the studio: all their lines are theirs.
        records.audit = try DeskQueries.audit(AuditFilter(player: userID, limit: bound), in: session)
        records.truncated = [
            records.grants.count, records.answers.count, records.notices.count, records.heldCredits.count,
            records.audit.count,
        ].contains(bound)
        return records
    }

    /// Apple's reports carrying the token, each by its key to the grant that holds the purchase.
    static func players(ofToken token: String, app: AppScope, in session: any SQLSession) throws -> [String] {
        let spelling = session.spelling
        return try session.rows(
            """
            SELECT DISTINCT g.user_id FROM \(spelling.table("unclaimed_purchases")) u
                JOIN \(spelling.table("grants")) g
                    ON g.app = u.app AND g.environment = u.environment AND g.purchase_id = u.purchase_id
                WHERE u.app = ?1 AND \(spelling.eventMember("u.event", "app_account_token")) = ?2
                    AND g.user_id IS NOT NULL
                LIMIT 10
            """, [.text(app.rawValue), .text(token)]
        ).compactMap { $0.text(0) }
    }

    static func player(ofOrder orderID: String, app: AppScope, in session: any SQLSession) throws -> String? {
        try session.first(
            """
            SELECT user_id FROM \(session.spelling.table("grants"))
                WHERE app = ?1 AND order_id = ?2 AND credit = 'job' AND user_id IS NOT NULL
            """, [.text(app.rawValue), .text(orderID)]
        )?.text(0)
    }
}

extension LedgerEngine {
    public func playerRecords(_ userID: String, app: AppScope, limit: Int) async throws -> PlayerRecords {
        try await dialect.read { try PlayerQueries.records(userID, app: app, limit: limit, in: $0) }
    }

    public func players(ofToken appAccountToken: String, app: AppScope) async throws -> [String] {
        try await dialect.read { try PlayerQueries.players(ofToken: appAccountToken, app: app, in: $0) }
    }

    public func player(ofOrder orderID: String, app: AppScope) async throws -> String? {
        try await dialect.read { try PlayerQueries.player(ofOrder: orderID, app: app, in: $0) }
    }
}
