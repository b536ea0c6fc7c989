import Crypto
public import Foundation
public import LedgerDomain
import Messaging
public import Support
import Vocabulary

/// What the desk's API does, without HTTP: each action checks the agent's role, does what the CLI's `lookup` and
/// `credit` do (``SupportDesk``, one implementation behind both), and appends its audit line, refused ones
/// included. Tested with an in-memory store and the App Store simulator, no server.
package struct DeskActions: Sendable {
    /// One configured app the desk serves (an app with an App Store Server API key).
    package struct App: Sendable {
        var name: String
        var bundleID: String
        var desk: SupportDesk

        package init(name: String, bundleID: String, desk: SupportDesk) {
            self.name = name
            self.bundleID = bundleID
            self.desk = desk
        }
    }

    let apps: [App]
    let store: any DeskStore
    let caps: CreditCaps
    /// Publishes a credit's event on the results topic; returns where it went.
    let publish: @Sendable (StoredEvent) async throws -> DeliveryReport
    let finishTransactions: Bool
    let metrics: DeskMetrics
    let now: @Sendable () -> Date
    /// Where a player's erasure is written, and the studio's key of it (`privacy.erasure_key_file`); nil: the desk
    /// does not erase.
    var erasure: Erasure? = nil

    package struct Erasure: Sendable {
        let store: any ErasureStore
        let key: [UInt8]

        package init(store: any ErasureStore, key: [UInt8]) {
            self.store = store
            self.key = key
        }
    }

    /// An answer: its HTTP status and JSON body.
    struct Answer: Sendable {
        var status: Int
        var body: Data

        static func json(_ status: Int, _ object: JSONValue) -> Answer { Answer(status: status, body: object.data) }

        static func refused(_ status: Int, _ reason: String) -> Answer {
            json(status, ["outcome": "refused", "error": .string(reason)])
        }
    }

    func app(_ name: String?) throws(BadRequest) -> App {
        let wanted = name ?? "default"
        guard let app = apps.first(where: { $0.name == wanted || $0.bundleID == wanted }) else {
            throw BadRequest("no app of this desk is named so (default, an apps.NAME, or a bundle id)")
        }
        return app
    }

    // MARK: Looking

    func lookup(_ agent: Agent, body: Data) async throws -> Answer {
        let form = try LookupForm(body)
        return try await look(
            agent, action: "lookup", ticket: form.ticket, app: try app(form.app), player: form.player,
            asked: Self.asked(form.query), query: form.query)
    }

    func history(_ agent: Agent, body: Data) async throws -> Answer {
        let form = try HistoryForm(body)
        return try await look(
            agent, action: "history", ticket: form.ticket, app: try app(form.app), player: nil,
            asked: ["transaction_id": .string(form.transactionID)],
            query: .customerOf(transactionID: form.transactionID))
    }

    private func look(
        _ agent: Agent, action: String, ticket: String, app: App, player: String?, asked: JSONValue,
        query: SupportDesk.Query
    ) async throws -> Answer {
        var line = audit(agent, action: action, app: app.name, ticket: ticket, player: player, request: asked)
        guard agent.has(.viewer) else {
            return try await refuse(&line, 403, "a support role is needed to look up purchases")
        }
        let report: LookupReport
        do {
            report = try await app.desk.lookup(query, now: now())
        } catch {
            line.outcome = "failed"
            line.answer = Self.json(["error": "Apple or the ledger did not answer"])
            try await store.appendAudit(line)
            throw error
        }
        line.outcome = report.purchases.isEmpty ? "not_found" : "answered"
        line.answer = Self.json(Self.lookupSummary(report))
        try await store.appendAudit(line)
        metrics.looked(action: action, outcome: line.outcome)
        return Answer(status: 200, body: report.json())
    }

    // MARK: The audit

    /// The audit lines asked for, newest first: a lead's of anyone, anyone else's of their own.
    func auditLines(_ agent: Agent, query: [String: String]) async throws -> Answer {
        guard agent.has(.viewer) else { return .refused(403, "a support role is needed") }
        var filter = AuditFilter()
        if let since = query["since"] {
            guard let date = RFC3339.parse(since) else { throw BadRequest("since must be an RFC 3339 time") }
            filter.since = date
        }
        if let subject = query["agent"] {
            guard DeskText.isPlain(subject, maxBytes: 255) else { throw BadRequest("agent must be a subject") }
            filter.agent = subject
        }
        if let player = query["player"] {
            guard DeskText.isPlain(player, maxBytes: 128) else { throw BadRequest("player must be a user id") }
            filter.player = player
        }
        if let limit = query["limit"] {
            guard let count = Int(limit), (1...10_000).contains(count) else {
                throw BadRequest("limit must be 1 to 10000")
            }
            filter.limit = count
        }
        if !agent.has(.lead) { filter.agent = agent.subject }
        let lines = try await store.audit(filter).map(AuditFormat.object)
        return .json(200, ["lines": .array(lines)])
    }

    // MARK: Helpers

    func audit(
        _ agent: Agent, action: String, app: String, ticket: String, player: String?, request: JSONValue
    ) -> AuditEntry {
        AuditEntry(
            at: now(), app: app, agent: agent.subject, agentName: agent.name, role: agent.role, action: action,
            outcome: "", ticket: ticket, player: player, request: Self.json(request), answer: "{}")
    }

    /// A request refused before its action ran (its agent's rate): audited under the action it asked for.
    func refuseRequest(_ agent: Agent, path: String, status: Int, reason: String) async throws -> Answer {
        var line = audit(
            agent, action: Self.action(of: path), app: "", ticket: "-", player: nil,
            request: ["path": .string(DeskText.shown(path))])
        return try await refuse(&line, status, reason)
    }

    /// The audit's action of a state-changing path: one of a fixed few (a metric's label too).
    static func action(of path: String) -> String {
        switch path {
        case "/desk/api/lookup": "lookup"
        case "/desk/api/history": "history"
        case "/desk/api/credit": "credit"
        case "/desk/api/extend": "extend"
        case "/desk/api/extend-all": "extend_all"
        case "/desk/api/player/export": "export"
        case "/desk/api/player/erase": "erase"
        case "/desk/api/sessions/end": "end_sessions"
        case "/desk/logout": "sign_out"
        case _ where path.hasPrefix("/desk/api/approvals/") && path.hasSuffix("/approve"): "approve"
        case _ where path.hasPrefix("/desk/api/approvals/") && path.hasSuffix("/reject"): "reject"
        default: "other"
        }
    }

    // MARK: Sessions

    /// A lead sees the console sessions open now (never their ids).
    func openSessions(_ agent: Agent) async throws -> Answer {
        guard agent.has(.lead) else { return .refused(403, "only a lead sees the sessions open") }
        let open = try await store.openSessions(now: now(), limit: 500).map { session -> JSONValue in
            [
                "agent": .string(session.subject), "name": .string(session.name), "roles": JSONValue(session.roles),
                "created_at": .string(RFC3339.format(session.createdAt)),
                "seen_at": .string(RFC3339.format(session.seenAt)),
                "expires_at": .string(RFC3339.format(session.expiresAt)),
            ]
        }
        return .json(200, ["sessions": .array(open)])
    }

    /// A lead ends every console session of an agent (a laptop lost, someone leaving): at once, on every replica.
    /// Their bearer tokens are the provider's to revoke. Audited, refusals included.
    func endSessions(_ agent: Agent, body: Data) async throws -> Answer {
        let form = try DeskForm(body, allowed: ["ticket", "agent"])
        let subject = try form.required(
            "agent", { DeskText.isPlain($0, maxBytes: 255) }, "the agent's subject at the sign-in provider")
        var line = audit(
            agent, action: "end_sessions", app: "", ticket: try form.ticket(), player: nil,
            request: ["agent": .string(subject)])
        guard agent.has(.lead) else { return try await refuse(&line, 403, "only a lead ends another's sessions") }
        let ended = try await store.endSessions(subject: subject, by: agent.subject, at: now())
        line.outcome = "ended"
        line.answer = Self.json(["ended": JSONValue(ended)])
        try await store.appendAudit(line)
        return .json(200, ["outcome": "ended", "ended": JSONValue(ended)])
    }

    /// An agent signs out of the console: its session ended for every replica (the cookie replayed later is
    /// refused), and a line in the audit, so that the audit says when each sign-in ended, not only how.
    func signOut(_ agent: Agent, sessionID: String?) async throws -> Answer {
        var line = audit(agent, action: "sign_out", app: "", ticket: "-", player: nil, request: [:])
        var ended = false
        if let sessionID { ended = try await store.endSession(id: sessionID, by: agent.subject, at: now()) }
        line.outcome = "signed out"
        line.answer = Self.json(["session_ended": .bool(ended)])
        try await store.appendAudit(line)
        return .json(200, ["outcome": "signed out"])
    }

    /// Refused by a rule of the desk (a role, a lead's own credit): audited, nothing else recorded.
    func refuse(_ line: inout AuditEntry, _ status: Int, _ reason: String) async throws -> Answer {
        line.outcome = "refused"
        line.answer = Self.json(["refused": .string(reason)])
        try await store.appendAudit(line)
        metrics.refused(action: line.action, role: line.role)
        return .refused(status, reason)
    }

    /// What a lookup answered, for the audit: the transactions shown and each one's case.
    static func lookupSummary(_ report: LookupReport) -> JSONValue {
        [
            "transactions": JSONValue(report.purchases.map(\.transactionID).filter { !$0.isEmpty }),
            "cases": JSONValue(report.purchases.map(\.verdict)), "not_found": .string(report.notFound ?? ""),
        ]
    }

    /// What a query asked, for the audit: an app account token shortened, as the CLI prints it.
    static func asked(_ query: SupportDesk.Query) -> JSONValue {
        switch query {
        case .transactionID(let id): ["transaction_id": .string(id)]
        case .appleOrderID(let id): ["apple_order_id": .string(id)]
        case .orderID(let id): ["order_id": .string(id)]
        case .appAccountToken(let token): ["app_account_token": .string(String(token.prefix(8)) + "…")]
        case .userID(let id): ["user_id": .string(id)]
        case .customerOf(let id): ["transaction_id": .string(id)]
        }
    }

    /// An audit line's request or answer, as the ledger keeps it: JSON text.
    static func json(_ object: JSONValue) -> String { object.text }
}

/// An audit line as the API and `ledger audit --json` show it.
enum AuditFormat {
    static func object(_ line: AuditEntry) -> JSONValue {
        func parsed(_ text: String) -> JSONValue { JSONValue(parsing: Data(text.utf8)) ?? .string(text) }
        return [
            "id": JSONValue(line.id), "at": .string(RFC3339.format(line.at)), "app": .string(line.app),
            "agent": .string(line.agent), "agent_name": .string(line.agentName), "role": .string(line.role),
            "action": .string(line.action), "outcome": .string(line.outcome), "ticket": .string(line.ticket),
            "player": JSONValue(line.player), "request": parsed(line.request), "answer": parsed(line.answer),
        ]
    }
}

/// The audit as `receipt-worker ledger audit` prints it.
public enum DeskAudit {
    public static func time(_ text: String) -> Date? { RFC3339.parse(text) }

    /// One JSON object, for a SIEM.
    public static func jsonLine(_ line: AuditEntry) -> String {
        DeskActions.json(AuditFormat.object(line))
    }

    public static func isTicket(_ text: String) -> Bool { DeskText.isTicket(text) }

    /// The audit's subject of an operator's command: `cli:` and who they said they are (`--by`), never an agent's
    /// subject at the sign-in provider, which a command line cannot prove.
    public static func operatorSubject(_ by: String) -> String { "cli:" + by }

    /// What an operator's command line adds to what it asked: that it came from the command line, and the login
    /// name of whoever ran it, when the system says one.
    static func fromCommandLine(_ asked: JSONValue) -> JSONValue {
        var asked = asked.object ?? [:]
        asked["via"] = "command line"
        let environment = ProcessInfo.processInfo.environment
        if let login = environment["USER"] ?? environment["LOGNAME"], DeskText.isPlain(login, maxBytes: 64) {
            asked["login"] = .string(login)
        }
        return .object(asked)
    }

    /// An operator's `receipt-worker lookup`, as the desk audits a lookup, under `--by`.
    public static func operatorLookup(
        _ query: SupportDesk.Query, report: LookupReport, app: String, by: String, ticket: String
    ) -> AuditEntry {
        var player: String?
        if case .userID(let id) = query { player = id }
        let action: String
        if case .customerOf = query { action = "history" } else { action = "lookup" }
        return AuditEntry(
            at: Date(), app: app, agent: operatorSubject(by), agentName: by, role: "operator", action: action,
            outcome: report.purchases.isEmpty ? "not_found" : "answered", ticket: ticket, player: player,
            request: DeskActions.json(fromCommandLine(DeskActions.asked(query))),
            answer: DeskActions.json(DeskActions.lookupSummary(report)))
    }

    /// An operator's `receipt-worker credit`, under `--by`.
    public static func operatorCredit(
        _ request: SupportDesk.CreditRequest, outcome: SupportDesk.CreditDecision, app: String, ticket: String
    ) -> AuditEntry {
        var asked: [String: JSONValue] = [
            "transaction_id": .string(request.transactionID), "order_id": .string(request.orderID),
            "user_id": .string(request.userID), "reason": .string(request.reason),
        ]
        if let id = request.appleOrderID { asked["apple_order_id"] = .string(id) }
        if let token = request.appAccountToken {
            asked["app_account_token_sha256"] = .string(SHA256Digest.hex(Array(token.uuidString.lowercased().utf8)))
        }
        let (result, answer): (String, JSONValue) =
            switch outcome {
            case .credited(let event, _, _, let note, _):
                ("credited", ["event_id": .string(event.eventID), "note": .string(note)])
            case .refused(let why): ("refused", ["refused": .string(why)])
            }
        return AuditEntry(
            at: Date(), app: app, agent: operatorSubject(request.by), agentName: request.by, role: "operator",
            action: "credit",
            outcome: result, ticket: ticket, player: request.userID,
            request: DeskActions.json(fromCommandLine(.object(asked))),
            answer: DeskActions.json(answer))
    }

    /// One line a person reads: when, who, what, the outcome, the ticket and the player.
    public static func textLine(_ line: AuditEntry) -> String {
        [
            RFC3339.format(line.at), "\(line.agentName) (\(line.role))", line.action, line.outcome,
            "ticket \(line.ticket)", line.player.map { "player \($0)" } ?? "-", "app \(line.app)",
        ].joined(separator: "  ")
    }
}
