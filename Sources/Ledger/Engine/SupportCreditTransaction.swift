import Foundation
import LedgerDomain
import Vocabulary

/// What support writes in one transaction: a credit with its caps and audit line, a credit held for a lead with its
/// line, so that no burst of requests passes a limit and no act is recorded without its line.
extension LedgerEngine {
    public func recordCredit(
        _ decision: Decision, caps: [DailyCounter], day: String, approval: ApprovalRequest.Move?,
        audit: @escaping @Sendable (ClaimVerdict) -> AuditEntry
    ) async throws -> SupportCreditRecord {
        let dialect = dialect
        var attempts = 0
        while true {
            attempts += 1
            do {
                return try await dialect.write { session in
                    // The lead's claim first (its row locked until the end): a rejection or a takeover since leaves
                    // nothing to credit.
                    if let move = approval {
                        guard
                            try DeskQueries.decide(id: move.id, from: .claimed(move.claim), to: move.claim, in: session)
                        else { throw DeskQueries.ApprovalTaken() }
                    }
                    // A subscription's period: the subscription locked first, as a renewal, a reversal and the tie
                    // below take them (the claim takes the period's), so none of them deadlocks with this one.
                    if let claim = decision.grant, claim.purchaseID.isBillingPeriod,
                        let original = claim.originalTransactionID, let purchase = decision.purchase
                    {
                        try PurchaseStatements(session: session).lock(purchase.subscription(original))
                    }
                    var outcome = try Self.claim([decision], dialect: dialect, in: session)[0].outcome
                    if outcome == .duplicateTransaction, let answer = decision.creditAnswer {
                        outcome = try PurchaseRules.claimCredit(
                            decision, answer: answer, in: PurchaseStatements(session: session)
                        ).outcome
                    }
                    // Taken only for a credit made now, in its transaction: a cap at its limit rolls the credit back.
                    if outcome.creditsAnew { try DeskQueries.reserve(caps, day: day, in: session) }
                    // Marked recorded with it: never rejected nor given back, only finished (its event published).
                    if let move = approval, outcome.leavesAnEvent {
                        _ = try DeskQueries.decide(
                            id: move.id, from: .claimed(move.claim), to: move.recorded, in: session)
                    }
                    return .recorded(outcome, auditID: try DeskQueries.appendAudit(audit(outcome), in: session))
                }
            } catch is DeskQueries.CapReached {
                return .capReached
            } catch is DeskQueries.ApprovalTaken {
                return .approvalTaken
            } catch let error as LedgerError where error.code == .conflict && attempts < 3 {
                // Another writer claimed the purchase or decided the request meanwhile: the retry reads what it did.
                continue
            }
        }
    }

    public func holdCredit(
        _ request: ApprovalRequest, limit: Int, held: @escaping @Sendable (Int64) -> AuditEntry,
        refused: @escaping @Sendable (Int) -> AuditEntry
    ) async throws -> HoldDecision {
        try await dialect.write { session in
            try DeskQueries.lockHolds(of: request.requestedBy, in: session)
            let waiting = try DeskQueries.waitingHolds(of: request.requestedBy, in: session)
            guard waiting < limit else {
                _ = try DeskQueries.appendAudit(refused(waiting), in: session)
                return .full(waiting: waiting)
            }
            let id = try DeskQueries.requestApproval(request, in: session)
            _ = try DeskQueries.appendAudit(held(id), in: session)
            return .held(id: id)
        }
    }
}
