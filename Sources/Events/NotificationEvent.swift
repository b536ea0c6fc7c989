package import Vocabulary
import AppleVerification
package import Foundation
package import LedgerDomain
import Observability

/// An event on `topics.results` about a purchase's life after its grant (docs/contract.md): revoked,
/// reinstated, or a consumption (refund) request. Keyed by the order the purchase was granted to; every
/// field always present, null when absent.
package enum NotificationEvent {
    package static let types: [EventType] = [.revoked, .reinstated, .consumptionRequested]

    /// Apple gives a consumption request 12 hours from the notification.
    package static let consumptionDeadline: TimeInterval = 12 * 3600

    /// The event of `type` for `notification` about the purchase `holder` holds: the granted order's user,
    /// product and quantity as the ledger holds them (Apple's transaction's for a grant recorded before the ledger
    /// kept them); for a refund or its reversal, what it takes from or gives back to revenue (``Revenue``), from
    /// what the grant's sale counted and what was refunded before.
    package static func make(type: String, notification: AppleNotification, holder: PurchaseHolder) -> StoredEvent {
        let grant = holder.grant
        let notifiedAt = notification.notifiedAt
        let eventID = StableID.uuid("\(type)\u{0}\(notification.id)\u{0}\(grant.orderID)")
        let transaction = notification.transaction
        let productID = grant.productID.isEmpty ? transaction?.productId ?? "" : grant.productID
        let quantity = grant.productID.isEmpty ? transaction?.quantity ?? grant.quantity : grant.quantity
        let string = EventJSON.string
        func time(_ milliseconds: Double?) -> String {
            EventJSON.time(milliseconds.flatMap { AppleTimestamp.date(milliseconds: $0) })
        }
        var out = "{\"event_id\":\(string(eventID)),\"type\":\(string(type)),\"order_id\":\(string(grant.orderID))"
        out += ",\"user_id\":\(string(grant.userID)),\"product_id\":\(string(productID))"
        out += ",\"quantity\":\(quantity),\"transaction_id\":\(string(transaction?.transactionId))"
        out += ",\"original_transaction_id\":\(string(transaction?.originalTransactionId))"
        out += ",\"environment\":\(string(notification.environment?.rawValue))"
        out += ",\"bundle_id\":\(string(notification.bundleID.isEmpty ? nil : notification.bundleID))"
        if type == EventType.revoked.rawValue {
            out += ",\"revocation_date\":\(time(transaction?.revocationDate))"
            out += ",\"revocation_reason\":\(transaction?.revocationReason.map { String($0.rawValue) } ?? "null")"
            out += ",\"revocation_type\":\(string(transaction?.revocationType?.rawValue))"
            out += ",\"revocation_percentage\":\(percentage(milliunits: transaction?.revocationPercentage))"
            out += EventJSON.value(transaction.map(PurchaseValue.init) ?? PurchaseValue())
            out += EventJSON.revenue(
                Revenue.ofRefund(
                    saleRevenue: grant.revenue, share: transaction?.revocationPercentage ?? 100_000,
                    refundedBefore: holder.refundedBefore))
        }
        if type == EventType.reinstated.rawValue {
            out += ",\"currency\":\(string(transaction?.currency))"
            out += EventJSON.revenue(
                Revenue.ofReversal(saleRevenue: grant.revenue, refundedBefore: holder.refundedBefore))
        }
        out += ",\"notification_id\":\(string(notification.id))"
        out += ",\"notified_at\":\(JSONString.quote(RFC3339.format(notifiedAt)))"
        if type == EventType.consumptionRequested.rawValue {
            let respondBy = notifiedAt.addingTimeInterval(consumptionDeadline)
            out += ",\"respond_by\":\(JSONString.quote(RFC3339.format(respondBy)))"
            out += ",\"consumption_request_reason\":\(string(notification.payload.data?.consumptionRequestReason))"
        }
        return StoredEvent(
            eventID: eventID, type: type, time: RFC3339.format(notifiedAt), key: grant.orderID,
            json: Array((out + "}").utf8))
    }

    /// Apple's milliunits (40000) as a percentage (40, or 67.932): null when absent (all of it). A value out
    /// of 0...100000 is clamped, never turned into null: null would tell a grant service to debit all.
    package static func percentage(milliunits: Int?) -> String {
        guard let raw = milliunits else { return "null" }
        let milliunits = min(max(raw, 0), 100_000)
        let whole = milliunits / 1000
        let fraction = milliunits % 1000
        guard fraction != 0 else { return String(whole) }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 3 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }
}
