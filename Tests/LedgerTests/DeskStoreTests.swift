import Foundation
import Ledger
import TestSupport
import Testing
import Vocabulary

/// What the support desk keeps in the ledger, the same from both backends: the audit, the caps, the credits held
/// for a lead, and a player's grants.
@Suite("The desk's ledger: audit, daily caps, held credits, a player's grants", .timeLimit(.minutes(1)))
struct DeskStoreTests {
    func line(_ agent: String, _ action: String, player: String?, at: Date) -> AuditEntry {
        AuditEntry(
            at: at, app: "default", agent: agent, agentName: "\(agent)@studio.test", role: "agent", action: action,
            outcome: "answered", ticket: "T-1", player: player, request: #"{"user_id":"p"}"#, answer: "{}")
    }

    /// A credit of ana's held for a lead: its id.
    func hold(in ledger: any Ledger) async throws -> Int64 {
        try await ledger.requestApproval(
            ApprovalRequest(
                createdAt: Date(timeIntervalSince1970: 1_800_000_000), app: "default", requestedBy: "ana",
                requestedName: "ana@studio.test", ticket: "T-9", player: "p1", request: #"{"transaction_id":"1"}"#))
    }

    @Test(
        "the audit keeps every line as written, newest first, filtered by time, agent and player",
        arguments: Backend.allCases)
    func audit(_ backend: Backend) async throws {
        let ledger = try await backend.open()
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        for index in 0..<6 {
            try await ledger.appendAudit(
                line(
                    index % 2 == 0 ? "ana" : "vic", index < 3 ? "lookup" : "credit",
                    player: index == 5 ? nil : "p\(index % 3)",
                    at: start.addingTimeInterval(Double(index) * 60)))
        }
        let all = try await ledger.audit(AuditFilter())
        #expect(all.count == 6 && all.map(\.id) == all.map(\.id).sorted(by: >))
        #expect(all.first?.action == "credit" && all.first?.player == nil && all.first?.agentName == "vic@studio.test")
        #expect(all.last?.request == #"{"user_id":"p"}"# && all.last?.at == start)
        #expect(try await ledger.audit(AuditFilter(agent: "ana")).count == 3)
        #expect(try await ledger.audit(AuditFilter(player: "p0")).map(\.agent) == ["vic", "ana"])
        #expect(try await ledger.audit(AuditFilter(since: start.addingTimeInterval(150))).count == 3)
        #expect(try await ledger.audit(AuditFilter(limit: 2)).count == 2)
        await ledger.close()
    }

    @Test(
        "a cap's places are taken all or none, atomically under contention, and given back", arguments: Backend.allCases
    )
    func caps(_ backend: Backend) async throws {
        let ledger = try await backend.open()
        let agent = DailyCounter(kind: "agent", who: "ana", limit: 5)
        let player = DailyCounter(kind: "player", who: "default\u{0}p1", limit: 3)
        // Twenty credits at once for one player by one agent: exactly three get a place.
        let taken = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<20 { group.addTask { try await ledger.reserveDailyUse([agent, player], day: "2026-12-04") } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(taken == 3)
        // The player's cap refused the others, and took nothing of the agent's for them.
        #expect(try await ledger.dailyUse(agent, day: "2026-12-04") == 3)
        #expect(try await ledger.dailyUse(player, day: "2026-12-04") == 3)
        try await ledger.releaseDailyUse([agent, player], day: "2026-12-04")
        #expect(try await ledger.reserveDailyUse([agent, player], day: "2026-12-04"))
        #expect(try await !ledger.reserveDailyUse([agent, player], day: "2026-12-04"))
        // Another day is another count; a release never goes below zero.
        #expect(try await ledger.reserveDailyUse([agent, player], day: "2026-12-05"))
        try await ledger.releaseDailyUse([agent], day: "2026-12-06")
        #expect(try await ledger.dailyUse(agent, day: "2026-12-06") == 0)
        // A cap of zero holds everything.
        #expect(
            try await !ledger.reserveDailyUse([DailyCounter(kind: "agent", who: "bob", limit: 0)], day: "2026-12-04"))
        await ledger.close()
    }

    @Test("a held credit is decided once: the first lead to claim it, never a second", arguments: Backend.allCases)
    func approvals(_ backend: Backend) async throws {
        let ledger = try await backend.open()
        let id = try await hold(in: ledger)
        let held = try #require(try await ledger.approvalRequest(id: id))
        #expect(held.status == .pending && held.requestedBy == "ana" && held.decision == nil && held.ticket == "T-9")
        let claim = ApprovalRequest.Decision(
            status: .approving, by: "lee", byName: "lee@studio.test", at: Date(timeIntervalSince1970: 1_800_000_100),
            outcome: "")
        let claims = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<10 { group.addTask { try await ledger.decideApproval(id: id, from: .pending, to: claim) } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(claims == 1)
        var done = claim
        done.status = .approved
        done.outcome = "credited"
        #expect(try await ledger.decideApproval(id: id, from: .approving, to: done))
        let decided = try #require(try await ledger.approvalRequest(id: id))
        #expect(decided.status == .approved && decided.decision?.byName == "lee@studio.test")
        #expect(decided.decision?.outcome == "credited")
        #expect(try await ledger.approvalRequests(status: .pending, limit: 10).isEmpty)
        #expect(try await ledger.approvalRequests(status: nil, limit: 10).map(\.id) == [id])
        #expect(try await ledger.approvalRequest(id: id + 1) == nil)
        await ledger.close()
    }

    @Test(
        "a stalled approval is taken over once however many leads try at once, and finished only by who took it",
        arguments: Backend.allCases)
    func stalledApprovalTakenOverOnce(_ backend: Backend) async throws {
        let ledger = try await backend.open()
        let id = try await hold(in: ledger)
        let claimedAt = Date(timeIntervalSince1970: 1_800_000_100.123)
        let claim = ApprovalRequest.Decision(
            status: .approving, by: "lee", byName: "lee@studio.test", at: claimedAt, outcome: "")
        #expect(try await ledger.decideApproval(id: id, from: .pending, to: claim))
        // Ten minutes on, lee's desk silent: leads take it over, each only while it is still stalled.
        let now = claimedAt.addingTimeInterval(600)
        let stalled = ApprovalRequest.Precondition.stalledBefore(now.addingTimeInterval(-ApprovalRequest.stalledAfter))
        let takeovers = (0..<10).map { lead in
            ApprovalRequest.Decision(
                status: .approving, by: "lead-\(lead)", byName: "lead-\(lead)@studio.test",
                at: now.addingTimeInterval(Double(lead) / 1_000), outcome: "")
        }
        let taken = try await withThrowingTaskGroup(of: Bool.self) { group in
            for takeover in takeovers {
                group.addTask { try await ledger.decideApproval(id: id, from: stalled, to: takeover) }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(taken == 1)
        let held = try #require(try await ledger.approvalRequest(id: id))
        let taker = try #require(takeovers.first { $0.by == held.decision?.by })
        #expect(held.status == .approving && held.isStalled(at: now) == false)
        // lee was slow, not gone: its answer comes back now and finds the credit another lead's.
        var lees = claim
        lees.status = .approved
        #expect(try await ledger.decideApproval(id: id, from: .claimed(claim), to: lees) == false)
        var done = taker
        done.status = .approved
        #expect(try await ledger.decideApproval(id: id, from: .claimed(taker), to: done))
        #expect(try await ledger.approvalRequest(id: id)?.decision?.by == taker.by)
        await ledger.close()
    }

    @Test(
        "a lead's credit is recorded with its approval marked, never rejected after; none once another lead rejected it",
        arguments: Backend.allCases)
    func approvalInTheCreditsTransaction(_ backend: Backend) async throws {
        let ledger = try await backend.open()
        let claimedAt = Date(timeIntervalSince1970: 1_800_000_100.123)
        let later = claimedAt.addingTimeInterval(600)
        let before = later.addingTimeInterval(-ApprovalRequest.stalledAfter)
        func held(claimedBy lead: String) async throws -> (Int64, ApprovalRequest.Decision) {
            let id = try await hold(in: ledger)
            let claim = ApprovalRequest.Decision(
                status: .approving, by: lead, byName: "\(lead)@studio.test", at: claimedAt, outcome: "")
            #expect(try await ledger.decideApproval(id: id, from: .pending, to: claim))
            return (id, claim)
        }
        func credit(
            _ order: String, transaction: String? = nil, approving id: Int64, claim: ApprovalRequest.Decision
        ) async throws -> SupportCreditRecord {
            let grant = GrantClaim(
                orderID: order, transactionID: transaction ?? "tx-\(order)", purchaseID: nil, environment: .production,
                userID: "p1", productID: "coins", quantity: 1, originalTransactionID: nil, revenue: nil)
            let decision = Decision(
                key: DecisionKey(app: .defaultApp, jobID: "support-\(order)", fingerprint: "f"), grant: grant,
                event: StoredEvent(
                    eventID: "event-\(order)", type: "receipt.granted", time: "", key: order, json: Array("{}".utf8)),
                refundFollowUp: nil, appleRefund: nil)
            return try await ledger.recordCredit(
                decision, caps: [], day: "", approval: .init(id: id, claim: claim)
            ) { _ in line("lee", "approve", player: "p1", at: later) }
        }
        // The honest lead: credited and its hold marked recorded together. Its desk then stops before the event is
        // out: stalled, the hold is never rejected, and another lead takes it over to finish it.
        let (first, lees) = try await held(claimedBy: "lee")
        guard case .recorded(.recorded, _) = try await credit("o1", approving: first, claim: lees) else {
            Issue.record("the approved credit was not recorded")
            return
        }
        let marked = try #require(try await ledger.approvalRequest(id: first))
        #expect(marked.isRecorded && marked.isStalled(at: later))
        #expect(marked.decidable(at: later, rejecting: true) == nil)
        let rejection = ApprovalRequest.Decision(
            status: .rejected, by: "lou", byName: "lou@studio.test", at: later, outcome: "")
        let rejected = try await ledger.decideApproval(
            id: first, from: .unrecordedStalledBefore(before), to: rejection)
        #expect(rejected == false)
        // Nor given back to pending by its lead (a COMMIT whose answer was lost).
        var back = lees
        back.status = .pending
        #expect(try await ledger.decideApproval(id: first, from: .claimedUnrecorded(lees), to: back) == false)
        // Another lead takes it over, the mark kept: still never rejected, even once that lead stalls too.
        let takeover = ApprovalRequest.Decision(
            status: .approving, by: "lou", byName: "lou@studio.test", at: later, outcome: "")
        #expect(try await ledger.decideApproval(id: first, from: .stalledBefore(before), to: takeover))
        let taken = try #require(try await ledger.approvalRequest(id: first))
        #expect(taken.decision?.by == "lou" && taken.isRecorded)
        let muchLater = later.addingTimeInterval(600)
        #expect(taken.decidable(at: muchLater, rejecting: true) == nil)
        let lateRejection = try await ledger.decideApproval(
            id: first, from: .unrecordedStalledBefore(muchLater.addingTimeInterval(-ApprovalRequest.stalledAfter)),
            to: rejection)
        #expect(lateRejection == false)
        // The slow lead: its desk silent past the stall, another lead rejects it; its credit then comes back and
        // records nothing, grant, answer nor audit line.
        let (second, slow) = try await held(claimedBy: "lee")
        #expect(try await ledger.decideApproval(id: second, from: .unrecordedStalledBefore(before), to: rejection))
        #expect(try await credit("o2", approving: second, claim: slow) == .approvalTaken)
        #expect(try await ledger.approvalRequest(id: second)?.status == .rejected)
        let key = DecisionKey(app: .defaultApp, jobID: "support-o2", fingerprint: "f")
        #expect(try await ledger.storedDecision(key) == nil)
        #expect(try await ledger.grantedToPlayer("p1", app: .defaultApp, limit: 10).map(\.orderID) == ["o1"])
        #expect(try await ledger.audit(AuditFilter()).count == 1)
        // A credit the ledger refuses (the purchase held by another order) leaves no event: its hold is not marked,
        // and its lead may give it back.
        let (third, lees3) = try await held(claimedBy: "lee")
        guard
            case .recorded(.duplicateTransaction, _) = try await credit(
                "o3", transaction: "tx-o1", approving: third, claim: lees3)
        else {
            Issue.record("the purchase held by o1 was credited again")
            return
        }
        #expect(try await ledger.approvalRequest(id: third)?.isRecorded == false)
        var given = lees3
        given.status = .pending
        #expect(try await ledger.decideApproval(id: third, from: .claimedUnrecorded(lees3), to: given))
        await ledger.close()
    }

    @Test("a player's grants, newest first, in their app only", arguments: Backend.allCases)
    func playerGrants(_ backend: Backend) async throws {
        let ledger = try await backend.open()
        for (job, order, transaction) in [("j1", "o1", "100"), ("j2", "o2", "101")] {
            _ = try await ledger.record(
                jobID: job, claim: .grant(orderID: order, transactionID: transaction), event: Data("{}".utf8))
        }
        // The test support names each grant's player player-ORDER.
        let grants = try await ledger.grantedToPlayer("player-o2", app: .defaultApp, limit: 10)
        #expect(grants.map(\.transactionID) == ["101"] && grants.first?.orderID == "o2")
        #expect(grants.first?.environment == .production)
        #expect(try await ledger.grantedToPlayer("player-o2", app: AppScope("com.other"), limit: 10).isEmpty)
        #expect(try await ledger.grantedToPlayer("nobody", app: .defaultApp, limit: 10).isEmpty)
        await ledger.close()
    }
}
