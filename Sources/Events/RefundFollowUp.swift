import Vocabulary
package import AppleVerification
import Foundation
package import LedgerDomain
import Observability

/// The `receipt.revoked` that follows a grant of a purchase Apple had refunded in part before any order held it
/// (docs/contract.md section 9): the purchase is granted for what the player kept, and this event, published
/// right after the grant and stored with it, takes the refunded share back, as a refund after the grant would.
/// Made from the grant and the refund the ledger remembers (its share and Apple's time), so a job delivered
/// again publishes the same bytes; Apple's notification of that refund was handled before any grant, so its id
/// is not known here (`notification_id` null) and the refund's reason is not either. The same follows a job of
/// the order that held the purchase already, when Apple's proof states a refund the ledger never heard of
/// (``RefundTaken/fromGrantHeld``): its id then names the refund too, and its revenue is the held sale's.
package enum RefundFollowUp {
    /// The prorated refund Apple's proof states (its share and `revocationDate`), for the ledger to take back if it
    /// did not hear of it; nil when the proof states none, or a whole refund (a deny).
    package static func stated(by transaction: AppleTransaction) -> RefundTaken? {
        guard transaction.isPartlyRefunded, let at = transaction.revocationDate, let share = transaction.revocationShare
        else { return nil }
        return RefundTaken(share: share, at: at)
    }

    package static func make(grant: ResultEvent, taken: RefundTaken) -> StoredEvent {
        let string = EventJSON.string, time = EventJSON.time
        let type = EventType.revoked.rawValue
        // Before the grant, one refund per grant; after it, the grant may be refunded, reversed and refunded again.
        let eventID =
            if taken.fromGrantHeld != nil {
                StableID.uuid(
                    "\(type)\u{0}after-grant\u{0}\(grant.eventID)\u{0}\(taken.share)\u{0}\(RFC3339.format(taken.at))")
            } else {
                StableID.uuid("\(type)\u{0}before-grant\u{0}\(grant.eventID)")
            }
        let saleRevenue = taken.fromGrantHeld.map(\.revenue) ?? grant.revenue
        var out = "{\"event_id\":\(string(eventID)),\"type\":\(string(type)),\"order_id\":\(string(grant.orderID))"
        out += ",\"user_id\":\(string(grant.userID)),\"product_id\":\(string(grant.productID))"
        out += ",\"quantity\":\(grant.quantity),\"transaction_id\":\(string(grant.transactionID))"
        out += ",\"original_transaction_id\":\(string(grant.originalTransactionID))"
        out += ",\"environment\":\(string(grant.environment?.rawValue)),\"bundle_id\":\(string(grant.bundleID))"
        out += ",\"revocation_date\":\(time(taken.at)),\"revocation_reason\":null"
        out += ",\"revocation_type\":\"REFUND_PRORATED\""
        out += ",\"revocation_percentage\":\(NotificationEvent.percentage(milliunits: taken.share))"
        out += EventJSON.value(grant.value)
        out += EventJSON.revenue(
            taken.revenueTaken ? 0 : Revenue.ofRefund(saleRevenue: saleRevenue, share: taken.share, refundedBefore: 0)
        )
        out += ",\"notification_id\":null,\"notified_at\":\(time(taken.at))}"
        return StoredEvent(
            eventID: eventID, type: type, time: RFC3339.format(taken.at), key: grant.orderID, json: Array(out.utf8))
    }
}
