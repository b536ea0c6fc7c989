public import Foundation
import Vocabulary

/// The support desk's statements (``DeskStore``), written once for both databases.
enum DeskQueries {
    static let auditColumns =
        "id, %at, app, agent, agent_name, role, action, outcome, ticket, player, request, answer"

    static func appendAudit(_ entry: AuditEntry, in session: any SQLSession) throws -> Int64 {
        let row = try session.first(
            """
            INSERT INTO \(session.spelling.table("desk_audit")) (at, app, agent, agent_name, role, action, outcome,
                ticket, player, request, answer) VALUES (\(session.spelling.time(1)), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,
                ?10, ?11) RETURNING id
            """,
            [
                .time(entry.at), .text(entry.app), .text(entry.agent), .text(entry.agentName), .text(entry.role),
                .text(entry.action), .text(entry.outcome), .text(entry.ticket), .optional(entry.player),
                .text(entry.request), .text(entry.answer),
            ])
        return row?.int64(0) ?? 0
    }

    /// Newest first; each condition an index's leading column (`at`, `agent`, `player`).
    static func audit(_ filter: AuditFilter, in session: any SQLSession) throws -> [AuditEntry] {
        let spelling = session.spelling
        var conditions: [String] = []
        var parameters: [SQLValue] = []
        func condition(_ text: (Int) -> String, _ value: SQLValue) {
            parameters.append(value)
            conditions.append(text(parameters.count))
        }
        if let since = filter.since { condition({ "at >= \(spelling.time($0))" }, .time(since)) }
        if let agent = filter.agent { condition({ "agent = ?\($0)" }, .text(agent)) }
        if let player = filter.player { condition({ "player = ?\($0)" }, .text(player)) }
        if let action = filter.action { condition({ "action = ?\($0)" }, .text(action)) }
        parameters.append(.integer(max(1, min(filter.limit, 10_000))))
        let columns = auditColumns.replacingOccurrences(of: "%at", with: spelling.readTime("at"))
        return try session.rows(
            """
            SELECT \(columns) FROM \(spelling.table("desk_audit"))
                \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
                ORDER BY id DESC LIMIT ?\(parameters.count)
            """, parameters
        ).map { row in
            AuditEntry(
                id: row.int64(0) ?? 0, at: row.time(1) ?? Date(timeIntervalSince1970: 0), app: row.text(2) ?? "",
                agent: row.text(3) ?? "", agentName: row.text(4) ?? "", role: row.text(5) ?? "",
                action: row.text(6) ?? "", outcome: row.text(7) ?? "", ticket: row.text(8) ?? "",
                player: row.text(9), request: row.text(10) ?? "{}", answer: row.text(11) ?? "{}")
        }
    }

    /// Each counter's row made if missing, then taken only while under its limit; any at its limit throws
    /// ``CapReached`` (the caller's transaction rolls back what the others took).
    static func reserve(_ counters: [DailyCounter], day: String, in session: any SQLSession) throws {
        let table = session.spelling.table("desk_daily_use")
        for counter in counters {
            try session.rows(
                "INSERT INTO \(table) (kind, who, day, used) VALUES (?1, ?2, ?3, 0) ON CONFLICT DO NOTHING",
                [.text(counter.kind), .text(counter.who), .text(day)])
            let taken = try session.first(
                """
                UPDATE \(table) SET used = used + 1 WHERE kind = ?1 AND who = ?2 AND day = ?3 AND used < ?4
                    RETURNING used
                """, [.text(counter.kind), .text(counter.who), .text(day), .integer(counter.limit)])
            if taken == nil { throw CapReached() }
        }
    }

    struct CapReached: Error {}

    /// A credit's approval no longer in the state its lead claimed it in: the credit's transaction rolls back.
    struct ApprovalTaken: Error {}

    static func release(_ counters: [DailyCounter], day: String, in session: any SQLSession) throws {
        for counter in counters {
            try session.rows(
                """
                UPDATE \(session.spelling.table("desk_daily_use")) SET used = used - 1
                    WHERE kind = ?1 AND who = ?2 AND day = ?3 AND used > 0
                """, [.text(counter.kind), .text(counter.who), .text(day)])
        }
    }

    static func dailyUse(_ counter: DailyCounter, day: String, in session: any SQLSession) throws -> Int {
        try session.first(
            "SELECT used FROM \(session.spelling.table("desk_daily_use")) WHERE kind = ?1 AND who = ?2 AND day = ?3",
            [.text(counter.kind), .text(counter.who), .text(day)]
        )?.int(0) ?? 0
    }

    static func requestApproval(_ held: ApprovalRequest, in session: any SQLSession) throws -> Int64 {
        try session.first(
            """
            INSERT INTO \(session.spelling.table("desk_approvals")) (created_at, app, requested_by, requested_name,
                ticket, player, request, status) VALUES (\(session.spelling.time(1)), ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                RETURNING id
            """,
            [
                .time(held.createdAt), .text(held.app), .text(held.requestedBy), .text(held.requestedName),
                .text(held.ticket), .text(held.player), .text(held.request), .text(held.status.rawValue),
            ]
        )?.int64(0) ?? 0
    }

    static func approvalRequests(id: Int64?, status: ApprovalRequest.Status?, limit: Int, in session: any SQLSession)
        throws
        -> [ApprovalRequest]
    {
        let spelling = session.spelling
        var conditions: [String] = []
        var parameters: [SQLValue] = []
        if let id {
            parameters.append(.integer(id))
            conditions.append("id = ?\(parameters.count)")
        }
        if let status {
            parameters.append(.text(status.rawValue))
            conditions.append("status = ?\(parameters.count)")
        }
        parameters.append(.integer(max(1, min(limit, 1_000))))
        return try session.rows(
            """
            SELECT id, \(spelling.readTime("created_at")), app, requested_by, requested_name, ticket, player, request,
                status, decided_by, decided_name, \(spelling.readTime("decided_at")), outcome
                FROM \(spelling.table("desk_approvals"))
                \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
                ORDER BY id DESC LIMIT ?\(parameters.count)
            """, parameters
        ).map { row in
            var held = ApprovalRequest(
                id: row.int64(0) ?? 0, createdAt: row.time(1) ?? Date(timeIntervalSince1970: 0),
                app: row.text(2) ?? "", requestedBy: row.text(3) ?? "", requestedName: row.text(4) ?? "",
                ticket: row.text(5) ?? "", player: row.text(6) ?? "", request: row.text(7) ?? "{}",
                status: ApprovalRequest.Status(rawValue: row.text(8) ?? "") ?? .pending)
            if let by = row.text(9) {
                held.decision = ApprovalRequest.Decision(
                    status: held.status, by: by, byName: row.text(10) ?? "",
                    at: row.time(11) ?? Date(timeIntervalSince1970: 0), outcome: row.text(12) ?? "")
            }
            return held
        }
    }

    static func decide(
        id: Int64, from: ApprovalRequest.Precondition, to decision: ApprovalRequest.Decision,
        in session: any SQLSession
    ) throws -> Bool {
        let spelling = session.spelling
        // The claim's time is compared with what its own desk wrote, converted the same way: equal to the byte.
        let (status, condition, values): (ApprovalRequest.Status, String, [SQLValue]) =
            switch from {
            case .status(let status): (status, "", [])
            case .stalledBefore(let time):
                (.approving, " AND (decided_at IS NULL OR decided_at < \(spelling.time(8)))", [.time(time)])
            case .unrecordedStalledBefore(let time):
                (
                    .approving,
                    " AND (decided_at IS NULL OR decided_at < \(spelling.time(8))) AND (outcome IS NULL OR outcome <> ?9)",
                    [.time(time), .text(ApprovalRequest.recordedOutcome)]
                )
            case .claimed(let claim):
                (
                    claim.status, " AND decided_at = \(spelling.time(8)) AND decided_by = ?9",
                    [.time(claim.at), .text(claim.by)]
                )
            case .claimedUnrecorded(let claim):
                (
                    claim.status,
                    " AND decided_at = \(spelling.time(8)) AND decided_by = ?9 AND (outcome IS NULL OR outcome <> ?10)",
                    [.time(claim.at), .text(claim.by), .text(ApprovalRequest.recordedOutcome)]
                )
            }
        return try session.first(
            """
            UPDATE \(spelling.table("desk_approvals")) SET status = ?3, decided_by = ?4, decided_name = ?5,
                decided_at = \(spelling.time(6)),
                outcome = CASE WHEN status = 'approving' AND ?3 = 'approving' AND outcome = '\(ApprovalRequest.recordedOutcome)'
                    THEN outcome ELSE ?7 END
                WHERE id = ?1 AND status = ?2\(condition) RETURNING id
            """,
            [
                .integer(id), .text(status.rawValue), .text(decision.status.rawValue), .text(decision.by),
                .text(decision.byName), .time(decision.at), .text(decision.outcome),
            ] + values) != nil
    }

    /// Takes an agent's lock of held credits for the rest of the transaction: the agent's row of the counter
    /// `held`, made when missing and updated to itself (a row lock in PostgreSQL; SQLite has one writer).
    static func lockHolds(of subject: String, in session: any SQLSession) throws {
        let table = session.spelling.table("desk_daily_use")
        try session.rows(
            "INSERT INTO \(table) (kind, who, day, used) VALUES ('held', ?1, '', 0) ON CONFLICT DO NOTHING",
            [.text(subject)])
        try session.rows(
            "UPDATE \(table) SET used = used WHERE kind = 'held' AND who = ?1 AND day = ''", [.text(subject)])
    }

    /// The credits of `subject` waiting for a lead.
    static func waitingHolds(of subject: String, in session: any SQLSession) throws -> Int {
        try session.first(
            """
            SELECT count(*) FROM \(session.spelling.table("desk_approvals"))
                WHERE status = 'pending' AND requested_by = ?1
            """, [.text(subject)]
        )?.int(0) ?? 0
    }

    // MARK: Console sessions

    static func startSession(_ desk: DeskSession, in session: any SQLSession) throws {
        let spelling = session.spelling
        try session.rows(
            """
            INSERT INTO \(spelling.table("desk_sessions")) (id, subject, name, roles, created_at, seen_at, expires_at)
                VALUES (?1, ?2, ?3, ?4, \(spelling.time(5)), \(spelling.time(6)), \(spelling.time(7)))
            """,
            [
                .text(desk.id), .text(desk.subject), .text(desk.name), .text(desk.roles.joined(separator: " ")),
                .time(desk.createdAt), .time(desk.seenAt), .time(desk.expiresAt),
            ])
    }

    static func sessions(_ condition: String, _ parameters: [SQLValue], limit: Int, in session: any SQLSession) throws
        -> [DeskSession]
    {
        let spelling = session.spelling
        return try session.rows(
            """
            SELECT id, subject, name, roles, \(spelling.readTime("created_at")), \(spelling.readTime("seen_at")),
                \(spelling.readTime("expires_at")), \(spelling.readTime("ended_at")), ended_by
                FROM \(spelling.table("desk_sessions")) WHERE \(condition) ORDER BY created_at DESC LIMIT \(limit)
            """, parameters
        ).map { row in
            let never = Date(timeIntervalSince1970: 0)
            return DeskSession(
                id: row.text(0) ?? "", subject: row.text(1) ?? "", name: row.text(2) ?? "",
                roles: (row.text(3) ?? "").split(separator: " ").map(String.init), createdAt: row.time(4) ?? never,
                seenAt: row.time(5) ?? never, expiresAt: row.time(6) ?? never, endedAt: row.time(7),
                endedBy: row.text(8))
        }
    }

    static func sessionSeen(id: String, at: Date, in session: any SQLSession) throws {
        try session.rows(
            "UPDATE \(session.spelling.table("desk_sessions")) SET seen_at = \(session.spelling.time(2)) WHERE id = ?1",
            [.text(id), .time(at)])
    }

    /// Ends the open sessions `condition` selects (its parameters from ?3); how many.
    static func endSessions(
        _ condition: String, _ parameters: [SQLValue], by: String, at: Date, in session: any SQLSession
    ) throws -> Int {
        try session.rows(
            """
            UPDATE \(session.spelling.table("desk_sessions")) SET ended_at = \(session.spelling.time(1)), ended_by = ?2
                WHERE ended_at IS NULL AND \(condition) RETURNING id
            """, [.time(at), .text(by)] + parameters
        ).count
    }

    /// By `grants_player` (app, user_id).
    static func grantedToPlayer(_ userID: String, app: AppScope, limit: Int, in session: any SQLSession) throws
        -> [PlayerGrant]
    {
        let spelling = session.spelling
        return try session.rows(
            """
            SELECT environment, transaction_id, order_id, \(spelling.readTime("granted_at"))
                FROM \(spelling.table("grants")) WHERE app = ?1 AND user_id = ?2 ORDER BY granted_at DESC LIMIT ?3
            """, [.text(app.rawValue), .text(userID), .integer(max(1, min(limit, 1_000)))]
        ).map {
            PlayerGrant(
                environment: AppleEnvironment(rawValue: $0.text(0) ?? ""), transactionID: $0.text(1) ?? "",
                orderID: $0.text(2) ?? "", grantedAt: $0.time(3))
        }
    }
}

extension LedgerEngine: DeskStore {
    public func appendAudit(_ entry: AuditEntry) async throws -> Int64 {
        try await dialect.write { try DeskQueries.appendAudit(entry, in: $0) }
    }

    public func audit(_ filter: AuditFilter) async throws -> [AuditEntry] {
        try await dialect.read { try DeskQueries.audit(filter, in: $0) }
    }

    public func reserveDailyUse(_ counters: [DailyCounter], day: String) async throws -> Bool {
        do {
            try await dialect.write { try DeskQueries.reserve(counters, day: day, in: $0) }
            return true
        } catch is DeskQueries.CapReached {
            return false
        }
    }

    public func releaseDailyUse(_ counters: [DailyCounter], day: String) async throws {
        try await dialect.write { try DeskQueries.release(counters, day: day, in: $0) }
    }

    public func dailyUse(_ counter: DailyCounter, day: String) async throws -> Int {
        try await dialect.read { try DeskQueries.dailyUse(counter, day: day, in: $0) }
    }

    public func requestApproval(_ held: ApprovalRequest) async throws -> Int64 {
        try await dialect.write { try DeskQueries.requestApproval(held, in: $0) }
    }

    public func approvalRequest(id: Int64) async throws -> ApprovalRequest? {
        try await dialect.read { try DeskQueries.approvalRequests(id: id, status: nil, limit: 1, in: $0).first }
    }

    public func approvalRequests(status: ApprovalRequest.Status?, limit: Int) async throws -> [ApprovalRequest] {
        try await dialect.read { try DeskQueries.approvalRequests(id: nil, status: status, limit: limit, in: $0) }
    }

    public func decideApproval(
        id: Int64, from: ApprovalRequest.Precondition, to decision: ApprovalRequest.Decision
    ) async throws -> Bool {
        try await dialect.write { try DeskQueries.decide(id: id, from: from, to: decision, in: $0) }
    }

    public func startSession(_ desk: DeskSession) async throws {
        try await dialect.write { try DeskQueries.startSession(desk, in: $0) }
    }

    public func session(id: String) async throws -> DeskSession? {
        try await dialect.read { try DeskQueries.sessions("id = ?1", [.text(id)], limit: 1, in: $0).first }
    }

    public func sessionSeen(id: String, at: Date) async throws {
        try await dialect.write { try DeskQueries.sessionSeen(id: id, at: at, in: $0) }
    }

    public func endSession(id: String, by: String, at: Date) async throws -> Bool {
        try await dialect.write { try DeskQueries.endSessions("id = ?3", [.text(id)], by: by, at: at, in: $0) > 0 }
    }

    public func endSessions(subject: String, by: String, at: Date) async throws -> Int {
        try await dialect.write {
            try DeskQueries.endSessions("subject = ?3", [.text(subject)], by: by, at: at, in: $0)
        }
    }

    public func openSessions(now: Date, limit: Int) async throws -> [DeskSession] {
        try await dialect.read { session in
            try DeskQueries.sessions(
                "ended_at IS NULL AND expires_at > \(session.spelling.time(1))", [.time(now)],
                limit: max(1, min(limit, 1_000)), in: session)
        }
    }

    public func grantedToPlayer(_ userID: String, app: AppScope, limit: Int) async throws -> [PlayerGrant] {
        try await dialect.read { try DeskQueries.grantedToPlayer(userID, app: app, limit: limit, in: $0) }
    }
}
