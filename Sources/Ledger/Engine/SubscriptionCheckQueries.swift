public import Foundation
public import Vocabulary

/// The statements of ``SubscriptionCheckStore``, and the watch a subscription's grant starts.
enum SubscriptionCheckQueries {
    static let watched = "('active', 'grace_period', 'billing_retry')"

    /// A subscription granted by a job is watched from its grant: its row says active until the period's end, as
    /// of no time at all (nothing heard yet: every notification about it applies, even one Apple signed a moment
    /// before the period's purchase date). A row a notification wrote is kept, unless this grant is of a later
    /// period that started after the row's last change (a player who subscribes again after an expiry: the same
    /// original transaction, a new order): active again until its end, as of its start.
    static func watch(
        app: AppScope, environment: AppleEnvironment, originalTransactionID: String, period: DateInterval,
        in session: any SQLSession
    ) throws {
        let spelling = session.spelling
        try session.rows(
            """
            INSERT INTO \(spelling.table("subscriptions")) AS s (app, environment, original_transaction_id, status,
                expires_at, changed_at) VALUES (?1, ?2, ?3, 'active', \(spelling.time(4)), \(spelling.time(5)))
                ON CONFLICT (app, environment, original_transaction_id) DO UPDATE
                    SET status = 'active', expires_at = excluded.expires_at, grace_period_expires_at = NULL,
                        changed_at = \(spelling.time(6))
                    WHERE COALESCE(s.expires_at < excluded.expires_at, TRUE) AND s.changed_at < \(spelling.time(6))
            """,
            [
                .text(app.rawValue), .text(environment.rawValue), .text(originalTransactionID), .time(period.end),
                .time(Date(timeIntervalSince1970: 0)), .time(period.start),
            ])
    }

    /// By the `subscriptions_overdue` index: (app, expires_at) of the subscriptions not ended.
    static func overdue(
        app: AppScope, endedBefore: Date, askedBefore: Date, limit: Int, in session: any SQLSession
    ) throws -> [OverdueSubscription] {
        let spelling = session.spelling
        return try session.rows(
            """
            SELECT environment, original_transaction_id, status, \(spelling.readTime("expires_at"))
                FROM \(spelling.table("subscriptions"))
                WHERE app = ?1 AND status IN \(watched) AND expires_at < \(spelling.time(2))
                    AND changed_at < \(spelling.time(2))
                    AND (status <> 'grace_period' OR grace_period_expires_at < \(spelling.time(2)))
                    AND (checked_at IS NULL OR checked_at < \(spelling.time(3)) OR checked_at < expires_at
                        OR (status = 'grace_period' AND checked_at < grace_period_expires_at))
                ORDER BY expires_at LIMIT ?4
            """, [.text(app.rawValue), .time(endedBefore), .time(askedBefore), .integer(limit)]
        ).compactMap { row in
            guard let original = row.text(1), let status = row.text(2), let expiresAt = row.time(3) else { return nil }
            return OverdueSubscription(
                environment: AppleEnvironment(rawValue: row.text(0) ?? ""), originalTransactionID: original,
                status: SubscriptionStatus(rawValue: status), expiresAt: expiresAt)
        }
    }
}

extension LedgerEngine: SubscriptionCheckStore {
    public func overdueSubscriptions(app: AppScope, endedBefore: Date, askedBefore: Date, limit: Int)
        async throws -> [OverdueSubscription]
    {
        try await dialect.read {
            try SubscriptionCheckQueries.overdue(
                app: app, endedBefore: endedBefore, askedBefore: askedBefore, limit: limit, in: $0)
        }
    }

    public func subscriptionAsked(
        app: AppScope, environment: AppleEnvironment, originalTransactionID: String, at: Date
    ) async throws {
        try await dialect.write { session in
            _ = try session.rows(
                """
                UPDATE \(session.spelling.table("subscriptions")) SET checked_at = \(session.spelling.time(4))
                    WHERE app = ?1 AND environment = ?2 AND original_transaction_id = ?3
                """,
                [.text(app.rawValue), .text(environment.rawValue), .text(originalTransactionID), .time(at)])
        }
    }
}
