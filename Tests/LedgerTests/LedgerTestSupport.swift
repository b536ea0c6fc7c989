import Foundation
import Ledger
import Vocabulary

/// A claim as these tests write it: a grant of a purchase to an order, or a deny.
enum LedgerClaim {
    case grant(
        orderID: String, transactionID: String, purchaseID: PurchaseID? = nil, originalTransactionID: String? = nil)
    case deny
}

/// The ledger's answer with a replay's JSON as `Data`, so expectations read as the events they compare.
enum Outcome: Equatable, Sendable {
    case recorded, replay(Data), duplicateTransaction, orderAlreadyFulfilled, revoked, credited(String)
    /// Recorded, with a follow-up's JSON (a purchase refunded in part before its grant).
    case recordedPartlyRefunded(Data)
    /// The order's grant answered again, with a follow-up's JSON (a refund Apple's proof states of a purchase held).
    case takenBack(Data)
}

extension Ledger {
    /// Records a decision of job `jobID` (default app, one fingerprint per job id unless given) with `event`
    /// as its JSON. `revenue`: what the grant's sale counts; `followUp`: the decision makes the follow-up of a refund
    /// made before its grant (its JSON `taken:SHARE`).
    func record(
        jobID: String, claim: LedgerClaim, event: Data, app: AppScope = .defaultApp, fingerprint: String = "f",
        environment: AppleEnvironment = .production, revenue: Int64? = nil, followUp: Bool = false,
        stated: RefundTaken? = nil
    ) async throws -> Outcome {
        let grant: GrantClaim? =
            switch claim {
            case .grant(let order, let transaction, let purchase, let original):
                GrantClaim(
                    orderID: order, transactionID: transaction, purchaseID: purchase, environment: environment,
                    userID: "player-\(order)", productID: "coins", quantity: 1, originalTransactionID: original,
                    revenue: revenue)
            case .deny: nil
            }
        let stored = StoredEvent(
            eventID: "event-\(jobID)", type: grant == nil ? "receipt.denied" : "receipt.granted",
            time: "2026-12-01T00:00:00.000Z", key: "order", json: Array(event))
        let maker: (@Sendable (RefundTaken) -> StoredEvent)? =
            followUp ? { @Sendable taken in followUpEvent(jobID: jobID, taken) } : nil
        let decision = Decision(
            key: DecisionKey(app: app, jobID: jobID, fingerprint: fingerprint), grant: grant, event: stored,
            refundFollowUp: maker, appleRefund: stated)
        switch try await record(decision) {
        case .recorded: return .recorded
        case .replay(let first): return .replay(Data(first.published.flatMap { $0.json }))
        case .duplicateTransaction: return .duplicateTransaction
        case .orderAlreadyFulfilled: return .orderAlreadyFulfilled
        case .revoked: return .revoked
        case .credited(let eventID, _): return .credited(eventID)
        case .recordedPartlyRefunded(let followUp): return .recordedPartlyRefunded(Data(followUp.json))
        case .tied(let answer): return .credited(answer.eventID)
        case .takenBack(let followUp): return .takenBack(Data(followUp.json))
        }
    }

    /// The JSON stored for job `jobID`, if it was decided before.
    func storedEvent(jobID: String, app: AppScope = .defaultApp, fingerprint: String = "f") async throws -> Data? {
        try await storedDecision(DecisionKey(app: app, jobID: jobID, fingerprint: fingerprint)).map { Data($0.json) }
    }
}

/// A follow-up event whose JSON says the share it takes back.
func followUpEvent(jobID: String, _ taken: RefundTaken) -> StoredEvent {
    StoredEvent(
        eventID: "follow-\(jobID)", type: "receipt.revoked", time: "", key: "order",
        json: Array("taken:\(taken.share)".utf8))
}
