import Foundation
import LedgerDomain
import Support
import Vocabulary

/// A lead's decisions on the credits held over a cap: the list, an approval (carried out as the agent asked it), a
/// rejection.
extension DeskActions {
    func approvalRequests(_ agent: Agent) async throws -> Answer {
        guard agent.has(.lead) else { return .refused(403, "only a lead sees the credits held for approval") }
        let waiting = try await store.approvalRequests(status: .pending, limit: 200)
        // And those whose approval stalled (the lead's desk stopped while carrying it out): listed, a lead approves
        // them again; nothing else would finish them, and an erasure of their player waits for them.
        let stalled = try await store.approvalRequests(status: .approving, limit: 200).filter {
            $0.isStalled(at: now())
        }
        let held = (stalled + waiting).sorted { $0.id > $1.id }
        return .json(200, ["approvals": .array(held.map(Self.object))])
    }

    /// A lead approves a credit held over a cap, made by someone else: credited as the agent asked it, their name
    /// on the event, the lead's on the audit. Every refusal (no such credit, decided already, their own) is audited.
    func approve(_ agent: Agent, id: Int64, body: Data) async throws -> Answer {
        let form = try DecisionForm(body, rejecting: false)
        var line = audit(
            agent, action: "approve", app: "", ticket: form.ticket, player: nil, request: ["approval_id": JSONValue(id)]
        )
        guard agent.has(.lead) else { return try await refuse(&line, 403, "only a lead approves a held credit") }
        guard let held = try await store.approvalRequest(id: id) else {
            return try await refuse(&line, 404, "no such held credit")
        }
        line.app = held.app
        line.player = held.player
        // An approval carried out by a lead whose process then stopped: taken over after a while (the credit is
        // one ledger claim: carrying it out twice grants nothing twice), only while still stalled: two leads at
        // once, one takes it.
        let at = now()
        guard let from = held.decidable(at: at) else {
            if held.isRecorded {
                return try await refuse(
                    &line, 409,
                    "its credit is recorded and its event may not be out yet: approve it again once it shows stalled"
                        + " (5 minutes after its claim)")
            }
            return try await refuse(&line, 409, "decided already: \(held.status.rawValue)")
        }
        // The subject, and the name too: a provider may give one person another subject per client.
        guard held.requestedBy != agent.subject, held.requestedName != agent.name else {
            return try await refuse(&line, 403, "a lead approves another person's credit, never their own")
        }
        guard let credit = try? JSONDecoder().decode(CreditForm.self, from: Data(held.request.utf8)),
            let app = try? app(held.app)
        else { return try await refuse(&line, 409, "the held credit cannot be read, or its app is no longer served") }
        let claimed = ApprovalRequest.Decision(
            status: .approving, by: agent.subject, byName: agent.name, at: at, outcome: "")
        guard try await store.decideApproval(id: id, from: from, to: claimed) else {
            return try await refuse(&line, 409, "another lead decided it first")
        }
        let requester = Agent(subject: held.requestedBy, name: held.requestedName, roles: [.agent], via: .session)
        // Recorded only while still this lead's claim, and marked recorded in the credit's own transaction: a lead
        // slower than the stall, whose approval another lead then rejected or took over, records nothing. Recorded,
        // it is never rejected nor given back; should this desk stop before the event is out, the next lead's
        // approval publishes it.
        let carried: CarriedOut
        do {
            carried = try await carryOut(
                credit, app: app, by: requester, line: line, caps: [], day: "",
                approval: .init(id: id, claim: claimed))
        } catch {
            // Apple or the ledger did not answer: back to pending, for this lead or another to approve again, unless
            // its credit was recorded (a COMMIT whose answer was lost): it stays, for a lead to finish.
            var back = claimed
            back.status = .pending
            _ = try? await store.decideApproval(id: id, from: .claimedUnrecorded(claimed), to: back)
            throw error
        }
        switch carried {
        case .approvalTaken:
            return try await refuse(&line, 409, "another lead rejected it or took it over meanwhile: nothing credited")
        case .capReached:
            return .refused(409, "ask again")
        case .answered(let answer, let outcome, let eventOut):
            var done = claimed
            done.status = .approved
            done.outcome = outcome + ": " + String(decoding: answer.body, as: UTF8.self)
            // Only while it is still this lead's claim: a lead slower than the stall, taken over, leaves it to the
            // other. Its event out (a step after it, the token, may be unfinished), whatever the mark; otherwise only
            // when nothing was recorded: a recorded credit whose event the broker did not take stays approving,
            // listed once stalled, for a lead to approve again.
            let from: ApprovalRequest.Precondition = eventOut ? .claimed(claimed) : .claimedUnrecorded(claimed)
            _ = try await store.decideApproval(id: id, from: from, to: done)
            metrics.credited(outcome: "approved_" + outcome, role: agent.role)
            return answer
        }
    }

    func reject(_ agent: Agent, id: Int64, body: Data) async throws -> Answer {
        let form = try DecisionForm(body, rejecting: true)
        var line = audit(
            agent, action: "reject", app: "", ticket: form.ticket, player: nil, request: ["approval_id": JSONValue(id)])
        guard agent.has(.lead) else { return try await refuse(&line, 403, "only a lead rejects a held credit") }
        guard let held = try await store.approvalRequest(id: id) else {
            return try await refuse(&line, 404, "no such held credit")
        }
        line.app = held.app
        line.player = held.player
        let decision = ApprovalRequest.Decision(
            status: .rejected, by: agent.subject, byName: agent.name, at: now(), outcome: form.reason ?? "")
        // Waiting, or stalled (its lead's desk stopped mid-way; one that cannot be carried out would stay forever and
        // hold its player's erasure), its credit not recorded: one its lead still carries out is refused by the
        // credit's transaction once this commits.
        if held.isRecorded {
            return try await refuse(
                &line, 409, "its credit is recorded: approve it again to finish it (its event is published then)")
        }
        guard let from = held.decidable(at: decision.at, rejecting: true),
            try await store.decideApproval(id: id, from: from, to: decision)
        else {
            return try await refuse(&line, 409, "decided already")
        }
        line.outcome = "rejected"
        line.answer = Self.json(["reason": .string(form.reason ?? "")])
        try await store.appendAudit(line)
        metrics.credited(outcome: "rejected", role: agent.role)
        return .json(200, ["outcome": "rejected"])
    }

    static func object(_ held: ApprovalRequest) -> JSONValue {
        var request = JSONValue(parsing: Data(held.request.utf8))?.object ?? [:]
        if let token = request["app_account_token"]?.string {
            request["app_account_token"] = .string(String(token.prefix(8)) + "…")
        }
        return [
            "id": JSONValue(held.id), "created_at": .string(RFC3339.format(held.createdAt)),
            "app": .string(held.app), "requested_by": .string(held.requestedBy),
            "requested_name": .string(held.requestedName), "ticket": .string(held.ticket),
            "player": .string(held.player), "request": .object(request), "status": .string(held.status.rawValue),
            "decided_by": JSONValue(held.decision?.byName), "outcome": JSONValue(held.decision?.outcome),
        ]
    }
}
