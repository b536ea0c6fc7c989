import Vocabulary
import Crypto
import Foundation
import LedgerDomain
import Support

/// The daily caps (`desk.caps.*`): what one agent credits in a UTC day, in every app, and how often support
/// credits one player of an app in a day. Counted in the ledger, taken before a credit and given back when the
/// credit is not recorded.
package struct CreditCaps: Sendable, Equatable {
    var agentDaily: Int
    var playerDaily: Int

    package init(agentDaily: Int, playerDaily: Int) {
        self.agentDaily = agentDaily
        self.playerDaily = playerDaily
    }

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

    /// An agent's credit: within the caps, credited as `receipt-worker credit` credits, its use of the caps and its
    /// audit line in the credit's own transaction; past either cap, held for a lead (nothing recorded but the hold
    /// and its line, in one transaction that counts the agent's holds). A burst of credits passes no limit.
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
            let carried = try await carryOut(form, app: app, by: agent, line: line, caps: [], day: "")
            guard case .answered(let answer, let outcome, _) = carried else { return .refused(409, "ask again") }
            metrics.credited(outcome: outcome, role: agent.role)
            return answer
        }
        let counters = caps.counters(agent: agent, app: app.name, player: form.userID)
        let day = CreditCaps.day(now())
        // Over a cap already: held without asking Apple. Within: credited, the cap's use taken in the credit's
        // transaction; one that a burst filled meanwhile is held the same way.
        if try await capsAvailable(counters, day: day),
            case .answered(let answer, let outcome, _) = try await carryOut(
                form, app: app, by: agent, line: line, caps: counters, day: day)
        {
            metrics.credited(outcome: outcome, role: agent.role)
            return answer
        }
        return try await hold(form, app: app, by: agent, line: line)
    }

    /// Whether every counter has room today (a look: the credit's transaction takes the use).
    private func capsAvailable(_ counters: [DailyCounter], day: String) async throws -> Bool {
        for counter in counters where try await store.dailyUse(counter, day: day) >= counter.limit { return false }
        return true
    }

    /// A credit held for a lead, unless the agent has ``pendingPerAgent`` waiting already (429): the count, the
    /// hold and its line in one transaction.
    private func hold(_ form: CreditForm, app: App, by agent: Agent, line: AuditEntry) async throws -> Answer {
        let held = ApprovalRequest(
            createdAt: now(), app: app.name, requestedBy: agent.subject, requestedName: agent.name, ticket: form.ticket,
            player: form.userID, request: form.json)
        let outcome = try await store.holdCredit(
            held, limit: Self.pendingPerAgent,
            held: { id in
                var held = line
                held.outcome = "held"
                held.answer = Self.json(["approval_id": JSONValue(id), "why": "over a daily cap"])
                return held
            },
            refused: { waiting in
                var refused = line
                refused.outcome = "refused"
                refused.answer = Self.json(["refused": .string(Self.tooManyHeld(waiting))])
                return refused
            })
        switch outcome {
        case .held(let id):
            metrics.credited(outcome: "held", role: agent.role)
            return .json(
                202,
                [
                    "outcome": "held", "approval_id": JSONValue(id),
                    "note": .string(
                        "over the daily cap (\(caps.agentDaily) credits an agent, \(caps.playerDaily) a player): held"
                            + " until a lead approves it"),
                ])
        case .full(let waiting):
            metrics.refused(action: "credit", role: agent.role)
            return .refused(429, Self.tooManyHeld(waiting))
        }
    }

    static func tooManyHeld(_ waiting: Int) -> String {
        "\(waiting) of your credits already wait for a lead: ask a lead to decide them first"
    }

    /// How many credits one agent may have waiting for a lead.
    static let pendingPerAgent = 20

    /// How carrying out a credit ended: answered (with the outcome the metrics count), or a cap full (nothing
    /// recorded: the caller holds it), or its approval decided otherwise meanwhile (nothing recorded).
    enum CarriedOut {
        /// `eventOut`: the credit's event was taken by the broker (the steps after it may still be unfinished).
        case answered(Answer, outcome: String, eventOut: Bool)
        case capReached
        case approvalTaken
    }

    /// The credit itself and its follow-through: the credit's audit line (`line`, with what came of it) is written
    /// in its transaction, or alone when it is refused before; a credit whose event or steps did not finish gets a
    /// second line, `unpublished`, saying what is left. A lead's approval (`approval`) is moved in the credit's
    /// transaction.
    func carryOut(
        _ form: CreditForm, app: App, by agent: Agent, line: AuditEntry, caps: [DailyCounter], day: String,
        approval: ApprovalRequest.Move? = nil
    ) async throws -> CarriedOut {
        let request = form.request(by: agent.name)
        let result: SupportDesk.CreditResult
        do {
            result = try await app.desk.credit(request, caps: caps, day: day, now: now(), approval: approval) {
                Self.creditLine(line, $0)
            }
        } catch {
            var failed = line
            failed.outcome = "failed"
            // A COMMIT whose answer was lost may have recorded it: the same request again finishes it either way.
            failed.answer = Self.json(["error": "Apple or the ledger did not answer: ask again, the same request"])
            _ = try? await store.appendAudit(failed)
            throw error
        }
        switch result {
        case .capReached:
            return .capReached
        case .approvalTaken:
            return .approvalTaken
        case .done(.refused(let why)):
            return .answered(
                .json(422, ["outcome": "refused", "note": .string(why)]), outcome: "refused", eventOut: false)
        case .done(.credited(let event, let original, let environment, let note, let setToken)):
            let followed = await app.desk.followThrough(
                event, originalTransactionID: original, environment: environment, setToken: setToken,
                request: request, finish: finishTransactions, send: publish)
            if let unfinished = followed.unfinished {
                var later = line
                later.outcome = "unpublished"
                later.answer = Self.json([
                    "event_id": .string(event.eventID), "steps": JSONValue(followed.notes),
                    "unfinished": .string(unfinished),
                ])
                try await store.appendAudit(later)
            }
            let outcome = followed.unfinished == nil ? "credited" : "unpublished"
            return .answered(
                .json(
                    followed.unfinished == nil ? 200 : 503,
                    [
                        "outcome": .string(outcome), "event_id": .string(event.eventID), "note": .string(note),
                        "steps": JSONValue(followed.notes), "unfinished": JSONValue(followed.unfinished),
                    ]), outcome: outcome, eventOut: followed.eventPublished)
        }
    }

    /// A credit's audit line, with what came of it (written in the credit's transaction).
    static func creditLine(_ line: AuditEntry, _ outcome: SupportDesk.CreditDecision) -> AuditEntry {
        var line = line
        switch outcome {
        case .credited(let event, _, _, let note, _):
            line.outcome = "credited"
            line.answer = json(["event_id": .string(event.eventID), "note": .string(note)])
        case .refused(let why):
            line.outcome = "refused"
            line.answer = json(["refused": .string(why)])
        }
        return line
    }

    /// What a credit asked, for the audit: the token shortened.
    static func creditAsked(_ form: CreditForm) -> JSONValue {
        var asked: [String: JSONValue] = [
            "transaction_id": .string(form.transactionID), "order_id": .string(form.orderID),
            "user_id": .string(form.userID), "reason": .string(form.reason),
        ]
        if let id = form.appleOrderID { asked["apple_order_id"] = .string(id) }
        // The token itself never: its SHA-256, which an investigator holding the player's token can match.
        if let token = form.appAccountToken {
            asked["app_account_token_sha256"] = .string(SHA256Digest.hex(Array(token.lowercased().utf8)))
        }
        return .object(asked)
    }

}
