import Foundation
public import LedgerDomain
public import Support
public import Vocabulary

/// A player's data request at the desk: a lead exports everything the ledger holds about a player. Audited with
/// how many of each kind it found, never the data.
struct PlayerDataForm {
    var ticket: String
    var app: String?
    var query: SupportDesk.PlayerQuery

    init(_ body: Data) throws(BadRequest) {
        let form = try DeskForm(body, allowed: ["ticket", "app", "user_id", "order_id", "app_account_token"])
        ticket = try form.ticket()
        app = try form.app()
        switch (form.has("user_id"), form.has("order_id"), form.has("app_account_token")) {
        case (true, false, false): query = .userID(try form.gameID("user_id"))
        case (false, true, false): query = .orderID(try form.gameID("order_id"))
        case (false, false, true):
            let token = try form.required("app_account_token", { UUID(uuidString: $0) != nil }, "a UUID")
            query = .appAccountToken(token.lowercased())
        default: throw BadRequest("name exactly one of user_id, order_id, app_account_token")
        }
    }
}

extension SupportDesk.PlayerQuery {
    /// What was asked, for the audit.
    var asked: JSONValue {
        switch self {
        case .userID(let id): ["user_id": .string(id)]
        case .orderID(let id): ["order_id": .string(id)]
        // Shortened, as lookups audit it: the audit never keeps a whole token.
        case .appAccountToken(let token): ["app_account_token": .string(String(token.prefix(8)) + "…")]
        }
    }
}

extension DeskActions {
    func exportPlayer(_ agent: Agent, body: Data) async throws -> Answer {
        let form = try PlayerDataForm(body)
        let app = try app(form.app)
        var player: String?
        if case .userID(let id) = form.query { player = id }
        var line = audit(
            agent, action: "export", app: app.name, ticket: form.ticket, player: player, request: form.query.asked)
        guard agent.has(.lead) else { return try await refuse(&line, 403, "only a lead exports a player's data") }
        let found: (String, JSONValue)?
        do {
            found = try await app.desk.playerData(form.query, now: now())
        } catch {
            line.outcome = "failed"
            line.answer = Self.json(["error": "the ledger did not answer"])
            try await store.appendAudit(line)
            throw error
        }
        guard let (userID, document) = found else {
            line.outcome = "not_found"
            line.answer = Self.json(["not_found": "no grant for that order"])
            try await store.appendAudit(line)
            return .refused(
                404,
                "the ledger holds no grant for that order, or no one player's purchase with that token, in this app")
        }
        line.player = userID
        line.outcome = "exported"
        line.answer = Self.json(PlayerData.exportSummary(document))
        try await store.appendAudit(line)
        return .json(200, document)
    }
}

extension DeskAudit {
    /// An operator's `receipt-worker player export`, under `--by`: how many of each it found, never the data.
    public static func operatorExport(
        _ query: SupportDesk.PlayerQuery, found: (userID: String, JSONValue)?, app: String, by: String, ticket: String
    ) -> AuditEntry {
        var player: String?
        if case .userID(let id) = query { player = id }
        return AuditEntry(
            at: Date(), app: app, agent: operatorSubject(by), agentName: by, role: "operator", action: "export",
            outcome: found == nil ? "not_found" : "exported", ticket: ticket, player: found?.userID ?? player,
            request: DeskActions.json(fromCommandLine(query.asked)),
            answer: DeskActions.json(found.map { PlayerData.exportSummary($0.1) } ?? ["not_found": "no grant"]))
    }
}

extension DeskAudit {
    /// A player's erasure, under `--by`: by the player's pseudonym, never the erased values; what it rewrote.
    public static func operatorErasure(
        _ outcome: PlayerData.ErasureOutcome, app: String, by: String, ticket: String
    ) -> AuditEntry {
        let (result, counts, pseudonym): (String, ErasureCounts, String?) =
            switch outcome {
            case .dryRun(let counts, let pseudonym): ("dry_run", counts, pseudonym)
            case .erased(let counts, let pseudonym, _): ("erased", counts, pseudonym)
            case .refused: ("refused", ErasureCounts(), nil)
            }
        return AuditEntry(
            at: Date(), app: app, agent: operatorSubject(by), agentName: by, role: "operator", action: "erase",
            outcome: result, ticket: ticket, player: pseudonym,
            request: DeskActions.json(fromCommandLine(["pseudonym": pseudonym.map(JSONValue.string) ?? .null])),
            answer: DeskActions.json(PlayerData.erasureSummary(counts)))
    }
}

extension DeskActions {
    /// A lead erases a player (docs/support-desk.md, "A player erased"), or with `dry_run` counts what it would
    /// rewrite. Audited by the player's pseudonym, never the erased values; a refusal names no one.
    func erasePlayer(_ agent: Agent, body: Data) async throws -> Answer {
        let form = try DeskForm(body, allowed: ["ticket", "app", "user_id", "dry_run"])
        let ticket = try form.ticket()
        let app = try app(try form.app())
        let userID = try form.gameID("user_id")
        let dryRun = try form.bool("dry_run") ?? false
        var line = audit(agent, action: "erase", app: app.name, ticket: ticket, player: nil, request: [:])
        guard agent.has(.lead) else { return try await refuse(&line, 403, "only a lead erases a player") }
        guard let erasure, let key = PlayerData.ErasureKey(erasure.key) else {
            return try await refuse(&line, 409, "this desk has no erasure key (privacy.erasure_key_file)")
        }
        let outcome: PlayerData.ErasureOutcome
        do {
            outcome = try await PlayerData.erase(
                userID: userID, app: app.desk.playerDataApp, key: key, ledger: erasure.store, by: agent.subject,
                dryRun: dryRun, now: now())
        } catch {
            // Nothing erased (the ledger's transaction did not commit): audited, naming no one.
            line.outcome = "failed"
            line.answer = Self.json(["error": "the ledger did not answer"])
            try await store.appendAudit(line)
            throw error
        }
        let (result, counts, pseudonym, event): (String, ErasureCounts, String, StoredEvent?)
        switch outcome {
        case .dryRun(let done, let named): (result, counts, pseudonym, event) = ("dry_run", done, named, nil)
        case .erased(let done, let named, let made): (result, counts, pseudonym, event) = ("erased", done, named, made)
        case .refused(let why): return try await refuse(&line, 409, why)
        }
        line.player = pseudonym
        line.request = Self.json(["pseudonym": .string(pseudonym), "dry_run": .bool(dryRun)])
        line.answer = Self.json(PlayerData.erasureSummary(counts))
        var answer: [String: JSONValue] = [
            "outcome": .string(result), "pseudonym": .string(pseudonym), "rewrote": PlayerData.erasureSummary(counts),
        ]
        if let event {
            do {
                _ = try await publish(event)
                try await PlayerData.markPublished(
                    pseudonym: pseudonym, app: app.desk.playerDataApp, ledger: erasure.store, at: now())
                answer["event_id"] = .string(event.eventID)
            } catch {
                line.outcome = "unpublished"
                try await store.appendAudit(line)
                return .json(
                    503,
                    [
                        "outcome": "unpublished", "pseudonym": .string(pseudonym),
                        "error": "erased; the broker did not take its player.erased event: ask again",
                    ])
            }
        }
        line.outcome = result
        try await store.appendAudit(line)
        return .json(200, .object(answer))
    }
}
