import Support
import Foundation
import LedgerDomain
import ReceiptWorker

/// The daily caps (`desk.caps.*`): what one agent credits in a UTC day, in every app, and how often support
/// credits one player of an app in a day. Counted in the ledger, taken before a credit and given back when the
/// credit is not recorded.
struct CreditCaps: Sendable, Equatable {
    var agentDaily: Int
    var playerDaily: Int

    func counters(agent: Agent, app: String, player: String) -> [DailyCounter] {
        [
            DailyCounter(kind: "agent", who: agent.subject, limit: agentDaily),
            // An app's name is a-z, 0-9 and _ (or `default`): the first slash ends it, whatever the player id holds.
            DailyCounter(kind: "player", who: "\(app)/\(player)", limit: playerDaily),
        ]
    }

    /// The UTC day of `date`, as the counters key it.
    static func day(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }
}

extension DeskActions {
    // MARK: Crediting

    /// An agent's credit: within the caps, credited as `receipt-worker credit` credits; past either cap, held for
    /// a lead (nothing recorded but the hold).
    func credit(_ agent: Agent, body: Data) async throws -> Answer {
        let form = try CreditForm(body)
        let app = try app(form.app)
        var line = audit(
            agent, action: "credit", app: app.name, ticket: form.ticket, player: form.userID,
            request: Self.creditAsked(form))
        guard agent.has(.agent) else {
            return try await refuse(&line, 403, "a viewer may look up, not credit: crediting needs the agent role")
        }
        // The same request again (its event not published, the token not set): finished, outside the caps.
        if try await app.desk.recordedBefore(form.request(by: agent.name)) {
            let answer = try await carryOut(form, app: app, by: agent, line: &line) { _ in }
            metrics.credited(outcome: line.outcome, role: agent.role)
            return answer
        }
        let counters = caps.counters(agent: agent, app: app.name, player: form.userID)
        let day = CreditCaps.day(now())
        guard try await store.reserveDailyUse(counters, day: day) else {
            let pending = try await store.approvalRequests(status: .pending, limit: 1_000)
                .filter { $0.requestedBy == agent.subject }
            guard pending.count < Self.pendingPerAgent else {
                return try await refuse(
                    &line, 429,
                    "\(pending.count) of your credits already wait for a lead: ask a lead to decide them first")
            }
            let id = try await store.requestApproval(
                ApprovalRequest(
                    createdAt: now(), app: app.name, requestedBy: agent.subject, requestedName: agent.name,
                    ticket: form.ticket, player: form.userID, request: form.json))
            line.outcome = "held"
            line.answer = Self.json(["approval_id": id, "why": "over a daily cap"])
            try await store.appendAudit(line)
            metrics.credited(outcome: "held", role: agent.role)
            return .json(
                202,
                [
                    "outcome": "held", "approval_id": id,
                    "note":
                        "over the daily cap (\(caps.agentDaily) credits an agent, \(caps.playerDaily) a player): held"
                        + " until a lead approves it",
                ])
        }
        let answer = try await carryOut(form, app: app, by: agent, line: &line) { recorded in
            if !recorded { try await store.releaseDailyUse(counters, day: day) }
        }
        metrics.credited(outcome: line.outcome, role: agent.role)
        return answer
    }

    /// How many credits one agent may have waiting for a lead.
    static let pendingPerAgent = 20

    /// The credit itself and its follow-through, audited on `line`; `settle` is told whether the ledger recorded a
    /// new credit (else a cap's use is given back).
    private func carryOut(
        _ form: CreditForm, app: App, by agent: Agent, line: inout AuditEntry,
        settle: (Bool) async throws -> Void
    ) async throws -> Answer {
        let request = form.request(by: agent.name)
        let outcome: SupportDesk.CreditOutcome
        do {
            outcome = try await app.desk.credit(request, now: now())
        } catch {
            try? await settle(false)
            line.outcome = "failed"
            line.answer = Self.json(["error": "Apple or the ledger did not answer: nothing recorded, ask again"])
            try await store.appendAudit(line)
            throw error
        }
        switch outcome {
        case .refused(let why):
            try await settle(false)
            line.outcome = "refused"
            line.answer = Self.json(["refused": why])
            try await store.appendAudit(line)
            return .json(422, ["outcome": "refused", "note": why])
        case .credited(let event, let original, let environment, let note, let setToken):
            try await settle(note != SupportDesk.repeatedCredit)
            let followed = await app.desk.followThrough(
                event, originalTransactionID: original, environment: environment, setToken: setToken,
                request: request, finish: finishTransactions, send: publish)
            line.outcome = followed.unfinished == nil ? "credited" : "unpublished"
            line.answer = Self.json([
                "event_id": event.eventID, "note": note, "published_to": followed.publishedTo ?? NSNull(),
                "steps": followed.notes, "unfinished": followed.unfinished ?? NSNull(),
            ])
            try await store.appendAudit(line)
            return .json(
                followed.unfinished == nil ? 200 : 503,
                [
                    "outcome": line.outcome, "event_id": event.eventID, "note": note, "steps": followed.notes,
                    "unfinished": followed.unfinished ?? NSNull(),
                ])
        }
    }

    // MARK: A lead's decisions

    func approvalRequests(_ agent: Agent) async throws -> Answer {
        guard agent.has(.lead) else { return .refused(403, "only a lead sees the credits held for approval") }
        let held = try await store.approvalRequests(status: .pending, limit: 200)
        return .json(200, ["approvals": held.map(Self.object)])
    }

    /// A lead approves a credit held over a cap, made by someone else: credited as the agent asked it, their name
    /// on the event, the lead's on the audit.
    func approve(_ agent: Agent, id: Int64, body: Data) async throws -> Answer {
        let form = try DecisionForm(body, rejecting: false)
        var line = audit(
            agent, action: "approve", app: "", ticket: form.ticket, player: nil, request: ["approval_id": id])
        guard agent.has(.lead) else { return try await refuse(&line, 403, "only a lead approves a held credit") }
        guard let held = try await store.approvalRequest(id: id) else { return .refused(404, "no such held credit") }
        line.app = held.app
        line.player = held.player
        // An approval carried out by a lead whose process then stopped: taken over after a while (the credit is
        // one ledger claim: carrying it out twice grants nothing twice).
        let stalled = held.status == .approving && (held.decision.map { now().timeIntervalSince($0.at) > 300 } ?? true)
        guard held.status == .pending || stalled else {
            return .refused(409, "decided already: \(held.status.rawValue)")
        }
        // The subject, and the name too: a provider may give one person another subject per client.
        guard held.requestedBy != agent.subject, held.requestedName != agent.name else {
            return try await refuse(&line, 403, "a lead approves another person's credit, never their own")
        }
        guard let credit = try? JSONDecoder().decode(CreditForm.self, from: Data(held.request.utf8)),
            let app = try? app(held.app)
        else { return .refused(409, "the held credit cannot be read, or its app is no longer served") }
        let claimed = ApprovalRequest.Decision(
            status: .approving, by: agent.subject, byName: agent.name, at: now(), outcome: "")
        guard try await store.decideApproval(id: id, from: held.status, to: claimed) else {
            return .refused(409, "another lead decided it first")
        }
        let requester = Agent(subject: held.requestedBy, name: held.requestedName, roles: [.agent], via: .session)
        var credited = line
        let answer: Answer
        do {
            answer = try await carryOut(credit, app: app, by: requester, line: &credited) { _ in }
        } catch {
            // Apple or the ledger did not answer: back to pending, for this lead or another to approve again.
            var back = claimed
            back.status = .pending
            _ = try? await store.decideApproval(id: id, from: .approving, to: back)
            throw error
        }
        var done = claimed
        done.status = .approved
        done.outcome = credited.outcome + ": " + credited.answer
        _ = try await store.decideApproval(id: id, from: .approving, to: done)
        metrics.credited(outcome: "approved_" + credited.outcome, role: agent.role)
        return answer
    }

    func reject(_ agent: Agent, id: Int64, body: Data) async throws -> Answer {
        let form = try DecisionForm(body, rejecting: true)
        var line = audit(
            agent, action: "reject", app: "", ticket: form.ticket, player: nil, request: ["approval_id": id])
        guard agent.has(.lead) else { return try await refuse(&line, 403, "only a lead rejects a held credit") }
        guard let held = try await store.approvalRequest(id: id) else { return .refused(404, "no such held credit") }
        line.app = held.app
        line.player = held.player
        let decision = ApprovalRequest.Decision(
            status: .rejected, by: agent.subject, byName: agent.name, at: now(), outcome: form.reason ?? "")
        guard try await store.decideApproval(id: id, from: .pending, to: decision) else {
            return .refused(409, "decided already")
        }
        line.outcome = "rejected"
        line.answer = Self.json(["reason": form.reason ?? ""])
        try await store.appendAudit(line)
        metrics.credited(outcome: "rejected", role: agent.role)
        return .json(200, ["outcome": "rejected"])
    }

    /// What a credit asked, for the audit: the token shortened.
    static func creditAsked(_ form: CreditForm) -> [String: Any] {
        var asked: [String: Any] = [
            "transaction_id": form.transactionID, "order_id": form.orderID, "user_id": form.userID,
            "reason": form.reason,
        ]
        if let id = form.appleOrderID { asked["apple_order_id"] = id }
        // The token itself never: its SHA-256, which an investigator holding the player's token can match.
        if let token = form.appAccountToken {
            asked["app_account_token_sha256"] = SHA256Digest.hex(Array(token.lowercased().utf8))
        }
        return asked
    }

    static func object(_ held: ApprovalRequest) -> [String: Any] {
        let formatter = ISO8601DateFormatter()
        var request = (try? JSONSerialization.jsonObject(with: Data(held.request.utf8))) as? [String: Any] ?? [:]
        if let token = request["app_account_token"] as? String {
            request["app_account_token"] = String(token.prefix(8)) + "…"
        }
        return [
            "id": held.id, "created_at": formatter.string(from: held.createdAt), "app": held.app,
            "requested_by": held.requestedBy, "requested_name": held.requestedName, "ticket": held.ticket,
            "player": held.player, "request": request, "status": held.status.rawValue,
            "decided_by": held.decision?.byName ?? NSNull(), "outcome": held.decision?.outcome ?? NSNull(),
        ]
    }
}
