public import Foundation
public import Vocabulary

/// What the answers by policy read (``ConsumptionRequestStore``): the requests due, whether one was answered, and
/// those that passed their deadline with no answer.
///
/// A grant service's answer counts for the request it came after: `answer_received_at` at or after the request's
/// `requested_at`. Opening a request again clears it, but a release before this one (1.0.0, beside it in an upgrade)
/// reopens without knowing the column: an answer to the request before must not answer the new one.
enum ConsumptionPolicyQueries {
    /// The request has a grant service's answer of its own.
    static let ownAnswerReceived = "(answer_received_at IS NOT NULL AND answer_received_at >= requested_at)"

    /// Unanswered requests of `app` whose deadline is before `dueBy` and not past at `now`, soonest first; by the
    /// requests' deadline index.
    static func due(app: AppScope, dueBy: Date, now: Date, limit: Int, in session: any SQLSession) throws
        -> [OpenConsumptionRequest]
    {
        let spelling = session.spelling
        return try session.rows(
            """
            SELECT environment, transaction_id, \(spelling.readTime("respond_by"))
                FROM \(spelling.table("consumption_requests"))
                WHERE respond_by <= \(spelling.time(2)) AND respond_by > \(spelling.time(3)) AND app = ?1
                    AND answered_at IS NULL AND NOT \(ownAnswerReceived)
                ORDER BY respond_by LIMIT ?4
            """, [.text(app.rawValue), .time(dueBy), .time(now), .integer(limit)]
        ).compactMap { row in
            guard let respondBy = row.time(2) else { return nil }
            return OpenConsumptionRequest(
                environment: AppleEnvironment(rawValue: row.text(0) ?? ""), transactionID: row.text(1) ?? "",
                respondBy: respondBy)
        }
    }

    static func answered(
        app: AppScope, environment: AppleEnvironment, transactionID: String, in session: any SQLSession
    )
        throws -> Bool
    {
        try session.first(
            """
            SELECT answered_at IS NOT NULL OR \(ownAnswerReceived)
                FROM \(session.spelling.table("consumption_requests"))
                WHERE app = ?1 AND environment = ?2 AND transaction_id = ?3
            """, [.text(app.rawValue), .text(environment.rawValue), .text(transactionID)]
        )?.bool(0) ?? false
    }

    /// The first time only: the request stays answered as of the first answer received (one received for a request
    /// before it does not count).
    static func answerReceived(
        app: AppScope, environment: AppleEnvironment, transactionID: String, in session: any SQLSession
    ) throws {
        try session.rows(
            """
            UPDATE \(session.spelling.table("consumption_requests")) SET answer_received_at = \(session.spelling.now)
                WHERE app = ?1 AND environment = ?2 AND transaction_id = ?3 AND NOT \(ownAnswerReceived)
            """, [.text(app.rawValue), .text(environment.rawValue), .text(transactionID)])
    }

    /// Requests per app whose deadline passed between `since` and `now` while still open (never closed: by an answer
    /// Apple took, by Apple's refusal, by the player's refusal of consent). A grant service's answer received but
    /// not taken by the deadline (late, failed) does not close it.
    static func missed(since: Date, now: Date, in session: any SQLSession) throws -> [AppScope: Int] {
        let rows = try session.rows(
            """
            SELECT app, count(*) FROM \(session.spelling.table("consumption_requests"))
                WHERE answered_at IS NULL AND respond_by > \(session.spelling.time(1)) AND respond_by <= \(session.spelling.time(2))
                GROUP BY app
            """, [.time(since), .time(now)])
        return Dictionary(
            rows.map { row in (AppScope(row.text(0) ?? ""), row.int(1) ?? 0) }, uniquingKeysWith: +)
    }
}

extension LedgerEngine {
    public func missedConsumptionRequests(since: Date, now: Date) async throws -> [AppScope: Int] {
        try await dialect.read { try ConsumptionPolicyQueries.missed(since: since, now: now, in: $0) }
    }

    public func dueConsumptionRequests(app: AppScope, dueBy: Date, now: Date, limit: Int) async throws
        -> [OpenConsumptionRequest]
    {
        try await dialect.read {
            try ConsumptionPolicyQueries.due(app: app, dueBy: dueBy, now: now, limit: limit, in: $0)
        }
    }

    public func consumptionAnswerReceived(app: AppScope, environment: AppleEnvironment, transactionID: String)
        async throws
    {
        try await dialect.write {
            try ConsumptionPolicyQueries.answerReceived(
                app: app, environment: environment, transactionID: transactionID, in: $0)
        }
    }

    public func consumptionRequestAnswered(app: AppScope, environment: AppleEnvironment, transactionID: String)
        async throws -> Bool
    {
        try await dialect.read {
            try ConsumptionPolicyQueries.answered(
                app: app, environment: environment, transactionID: transactionID, in: $0)
        }
    }
}
