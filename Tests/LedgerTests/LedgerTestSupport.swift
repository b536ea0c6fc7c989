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
}

extension Ledger {
    /// Records a decision of job `jobID` (default app, one fingerprint per job id unless given) with `event`
    /// as its JSON.
    func record(
        jobID: String, claim: LedgerClaim, event: Data, app: AppScope = .defaultApp, fingerprint: String = "f",
        environment: AppleEnvironment = .production
    ) async throws -> Outcome {
        let grant: GrantClaim? =
            switch claim {
            case .grant(let order, let transaction, let purchase, let original):
                GrantClaim(
                    orderID: order, transactionID: transaction, purchaseID: purchase, environment: environment,
                    userID: "player-\(order)", productID: "coins", quantity: 1, originalTransactionID: original)
            case .deny: nil
            }
        let stored = StoredEvent(
            eventID: "event-\(jobID)", type: grant == nil ? "receipt.denied" : "receipt.granted",
            time: "2026-12-01T00:00:00.000Z", key: "order", json: Array(event))
        let decision = Decision(
            key: DecisionKey(app: app, jobID: jobID, fingerprint: fingerprint), grant: grant, event: stored)
        switch try await record(decision) {
        case .recorded: return .recorded
        case .replay(let first): return .replay(Data(first.json))
        case .duplicateTransaction: return .duplicateTransaction
        case .orderAlreadyFulfilled: return .orderAlreadyFulfilled
        case .revoked: return .revoked
        case .credited(let eventID): return .credited(eventID)
        }
    }

    /// The JSON stored for job `jobID`, if it was decided before.
    func storedEvent(jobID: String, app: AppScope = .defaultApp, fingerprint: String = "f") async throws -> Data? {
        try await storedDecision(DecisionKey(app: app, jobID: jobID, fingerprint: fingerprint)).map { Data($0.json) }
    }
}
