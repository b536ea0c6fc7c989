package import Foundation
import Vocabulary

/// A job's claim: the one place that decides what a decision does to the ledger (docs/contract.md section 3).
/// Each ledger reads what it holds about a batch of decisions (``ClaimFacts``), under the locks of their
/// purchases, lets these rules decide each decision in order, and writes what they say in one transaction; the
/// two ledgers differ only in that SQL.
///
/// - A job decided before gets its stored event (a result stored before fingerprints answers any of its job's).
/// - A deny claims nothing: its event is stored.
/// - A purchase refunded or revoked (a grant of it revoked, or a refund of all of it remembered for it) is
///   `revoked`. A purchase Apple refunded in part before any order held it is granted for what the player kept,
///   and the decision's follow-up event takes the refunded share back (stored with it); without a follow-up
///   maker it is `revoked`.
/// - Held by this order under the same transaction, with a refund of part of it that Apple's proof states and the
///   ledger never heard of: the grant is answered again and the follow-up takes the share back (the refund
///   remembered, the grant revoked, as its notification would leave them).
/// - A purchase granted to another order is `duplicate_transaction`; held by this order under another
///   transaction id (a restore) it is `order_already_fulfilled`; held by this order through a credit of the
///   worker's (a renewal, a tied unclaimed purchase), the job is that credit (answered by the decision's
///   ``Decision/creditAnswer``, stored). Held by a credit of a purchase no job claimed, the engine ties it to the
///   order after the batch (``PurchaseRules/claimCredit(_:answer:in:)``).
/// - An order granted with another purchase is `order_already_fulfilled`.
/// - Otherwise the purchase is granted to the order, with the decision.
///
/// Decisions of one batch see each other's writes: two jobs of one batch claiming one purchase are decided
/// one after the other, as two transactions would be.
package enum ClaimRules {
    /// The outcome of each decision, in order, and the rows to write. `facts` is updated with the writes.
    package static func decide(_ decisions: [Decision], facts: inout ClaimFacts) -> [ClaimResult] {
        decisions.map { decide($0, facts: &facts) }
    }

    package static func decide(_ decision: Decision, facts: inout ClaimFacts) -> ClaimResult {
        let key = decision.key
        if let stored = facts.result(key) { return ClaimResult(outcome: .replay(stored)) }
        guard let claim = decision.grant else {
            facts.addResult(key, decision.event)
            return ClaimResult(outcome: .recorded, result: decision.event)
        }
        let owners = facts.owners(app: key.app, claim)
        // Refunded or revoked, before or after a grant: never again (a share refunded before any grant: below).
        // The ledger's memory of a refund, or what Apple's proof states, whichever refunded more.
        let remembered = facts.refund(app: key.app, claim)
        // A refund the proof states that Apple gave back since (the proof older than the reversal) is over.
        let stated =
            facts.isReversed(app: key.app, claim)
            ? nil : decision.appleRefund.map { RefundTaken(share: min(max($0.share, 0), 100_000), at: $0.at) }
        let refund = [remembered, stated].compactMap { $0 }.max { $0.share < $1.share }
        // A credit of a purchase no job claimed, refunded in part since, is still to be tied to its player's order
        // (``PurchaseRules/claimCredit(_:answer:in:)``): the rest is theirs.
        let revoked = owners.filter(\.revoked)
        let partlyRefundedCredit =
            !revoked.isEmpty && revoked.allSatisfy { !$0.isJobGrant && UnclaimedOrderID.isReserved($0.orderID) }
            && refund.map { $0.share < 100_000 } == true
        if (!revoked.isEmpty && !partlyRefundedCredit) || refund.map({ $0.share >= 100_000 }) == true {
            return ClaimResult(outcome: .revoked)
        }
        if owners.contains(where: { !ClaimFacts.same($0.orderID, claim.orderID) }) {
            return ClaimResult(outcome: .duplicateTransaction)
        }
        if !owners.isEmpty {
            // This order holds the purchase: the same transaction again is the same grant; another transaction
            // of the same purchase (a restore) is not a second grant of the order.
            guard let same = owners.first(where: { ClaimFacts.same($0.transactionID, claim.transactionID) }) else {
                return ClaimResult(outcome: .orderAlreadyFulfilled)
            }
            if let credit = same.creditEventID, credit != decision.event.eventID {
                guard let make = decision.creditAnswer else {
                    return ClaimResult(outcome: .credited(eventID: credit, revenue: same.revenue))
                }
                let answer = make(credit, same.revenue)
                facts.addResult(key, answer)
                return ClaimResult(outcome: .tied(answer), result: answer)
            }
            if let stated, remembered == nil, same.isJobGrant, !same.revoked, let make = decision.refundFollowUp {
                // Apple's proof states a refund of part of what the order holds, which the ledger never heard of
                // (its notification lost, no sweep to find it): taken back now, as that notification would have
                // (it finds the refund remembered, and takes nothing twice); the grant is answered again, unchanged.
                var taken = stated
                taken.fromGrantHeld = RefundTaken.GrantHeld(revenue: same.revenue)
                let followUp = make(taken)
                var stored = decision.event
                stored.followUps = [followUp]
                facts.addResult(key, stored)
                facts.revoke(same)
                return ClaimResult(
                    outcome: .takenBack(followUp: followUp), result: decision.event, followUp: followUp,
                    heldRefunded: stated)
            }
            facts.addResult(key, decision.event)
            return ClaimResult(outcome: .recorded, result: decision.event)
        }
        if facts.orderHasJobGrant(app: key.app, orderID: claim.orderID) {
            return ClaimResult(outcome: .orderAlreadyFulfilled)
        }
        // Refunded in part before any order held it: granted for what the player kept, the share taken back at
        // once by the follow-up (never granted whole with nothing to take the share back).
        var followUp: StoredEvent?
        if let refund {
            guard let make = decision.refundFollowUp else { return ClaimResult(outcome: .revoked) }
            followUp = make(refund)
        }
        let grant = GrantFact(
            app: key.app, environment: claim.environment.rawValue, transactionID: claim.transactionID,
            purchaseID: claim.purchaseID.key, orderID: claim.orderID, isJobGrant: true, creditEventID: nil,
            revoked: refund != nil, revenue: claim.revenue)
        facts.addGrant(grant)
        var stored = decision.event
        stored.followUps = followUp.map { [$0] } ?? []
        facts.addResult(key, stored)
        guard let followUp, let refund else {
            return ClaimResult(outcome: .recorded, grant: claim, result: decision.event)
        }
        // A refund only the proof stated is remembered, as its notification would have made it.
        let seen = stated.flatMap { $0.share > (remembered?.share ?? -1) ? $0 : nil }
        return ClaimResult(
            outcome: .recordedPartlyRefunded(followUp: followUp), grant: claim, result: decision.event,
            followUp: followUp, revokedAt: refund.at, refundSeen: seen)
    }

    /// Where a decision's follow-up event is stored: a result row of its job beside its own, under its fingerprint
    /// and this suffix (a job's lookup reads every row of its job id; a release before follow-ups reads only its
    /// own fingerprint's).
    package static let followUpSuffix = "+refund"

    package static func followUpKey(_ key: DecisionKey) -> DecisionKey {
        DecisionKey(app: key.app, jobID: key.jobID, fingerprint: key.fingerprint + followUpSuffix)
    }
}

/// What one decision does to the ledger: its outcome, the grant to insert and the result to store (nil: none);
/// a follow-up event to store beside the result (``ClaimRules/followUpKey(_:)``), and when the grant is inserted
/// revoked (a purchase refunded in part before it was granted).
package struct ClaimResult {
    package var outcome: ClaimVerdict
    package var grant: GrantClaim? = nil
    package var result: StoredEvent? = nil
    package var followUp: StoredEvent? = nil
    package var revokedAt: Date? = nil
    /// A refund Apple's proof stated that the ledger did not remember: written as the purchase's state.
    package var refundSeen: RefundTaken? = nil
    /// A refund Apple's proof stated of a purchase the order already held: written as the refund's notification
    /// writes it (the purchase's state, its grant revoked).
    package var heldRefunded: RefundTaken? = nil

    package init(
        outcome: ClaimVerdict, grant: GrantClaim? = nil, result: StoredEvent? = nil, followUp: StoredEvent? = nil,
        revokedAt: Date? = nil, refundSeen: RefundTaken? = nil, heldRefunded: RefundTaken? = nil
    ) {
        self.outcome = outcome
        self.grant = grant
        self.result = result
        self.followUp = followUp
        self.revokedAt = revokedAt
        self.refundSeen = refundSeen
        self.heldRefunded = heldRefunded
    }
}
