import Foundation
import Vocabulary

/// A subscription's period refunded before any credit of it (its `DID_RENEW` came after the refund, or never), then
/// the refund reversed: the player paid for the period, and it is credited now, to the subscription's order, as the
/// renewal would have credited it (the same `event_id`: a job presenting the period for that order is answered
/// with it). Without this the reversal found no grant to give back and the renewal, heard while it was refunded,
/// credited nothing: the period was never the player's.
extension PurchaseRules {
    /// The subscription whose period a reversal may credit: locked before the period, as a renewal locks them.
    package static func subscriptionToLock(for change: NotificationChange) -> PurchaseKey? {
        guard case .reinstate(let purchaseID, _, _, let period?) = change.kind else { return nil }
        return PurchaseKey(app: change.app, environment: change.environment, purchaseID: purchaseID)
            .subscription(period.originalTransactionID)
    }

    /// After ``decide(_:facts:)`` of a reversal: credits its period when no grant holds it, it was refunded, and an
    /// order here holds the subscription (one no order holds was kept as a reported purchase, reopened by the
    /// decision). The credit is written here; the decision's writes (the period's state) follow in the same
    /// transaction.
    package static func creditReversedPeriod(
        _ change: NotificationChange, facts: PurchaseFacts, decided: inout NotificationDecision,
        in transaction: some PurchaseStateTransaction
    ) throws {
        guard case .reinstate(let purchaseID, _, _, let period?) = change.kind, let renewal = period.renewal,
            facts.grant == nil, facts.state?.revoked == true, !decided.writes.isEmpty,
            let holder = try transaction.subscriptionGrant(
                app: change.app, environment: change.environment, originalTransactionID: period.originalTransactionID)
        else { return }
        let purchase = PurchaseKey(app: change.app, environment: change.environment, purchaseID: purchaseID)
        guard
            try transaction.insertCredit(
                Credit(
                    kind: .renewal, purchase: purchase, transactionID: renewal.transactionID,
                    originalTransactionID: period.originalTransactionID, orderID: holder.orderID,
                    userID: holder.userID, productID: renewal.productID, quantity: renewal.quantity,
                    eventID: renewal.eventID, revenue: renewal.revenue)),
            let credited = try transaction.grant(of: purchase, transactionID: renewal.transactionID)
        else { return }
        // The subscription's expiry moved as far as the period's; its status is the last one heard (a reversal says
        // nothing of it: a period reversed long after the subscription expired leaves it expired).
        let last = try transaction.subscriptionState(
            app: change.app, environment: change.environment, originalTransactionID: period.originalTransactionID)
        var state = last ?? period.state
        state.expiresAt = merge(period.state, into: last).0.expiresAt
        if state != last {
            try transaction.setSubscriptionState(
                app: change.app, environment: change.environment,
                originalTransactionID: period.originalTransactionID, state)
        }
        decided.granted = true
        decided.wanted = PurchaseHolder(grant: credited, subscription: state)
    }
}
