import AppleVerification
import Foundation
import Kafka
import Observability

/// An event on `topics.results` about a purchase's life after its grant (docs/contract.md): revoked,
/// reinstated, or a consumption (refund) request. Keyed by the order the purchase was granted to; every
/// field always present, null when absent.
struct NotificationEvent: Sendable {
    static let revokedType = "receipt.revoked"
    static let reinstatedType = "receipt.reinstated"
    static let consumptionRequestedType = "receipt.consumption_requested"
    static let types = [revokedType, reinstatedType, consumptionRequestedType]

    /// Apple gives a consumption request 12 hours from the notification.
    static let consumptionDeadline: TimeInterval = 12 * 3600

    let type: String
    let eventID: String
    let orderID: String
    let json: Data
    let notifiedAt: Date

    /// The granted order's fields: from the grant's stored event, else (a grant recorded before the ledger
    /// kept events) Apple's transaction, with an empty user id.
    struct Grant {
        var orderID: String
        var userID: String
        var productID: String
        var quantity: Int
    }

    init(type: String, notification: AppleNotification, grant: Grant) {
        self.type = type
        orderID = grant.orderID
        notifiedAt = notification.notifiedAt
        eventID = StableID.uuid("\(type)\u{0}\(notification.id)\u{0}\(grant.orderID)")
        let transaction = notification.transaction
        func string(_ value: String?) -> String { value.map(JSONString.quote) ?? "null" }
        func time(_ milliseconds: Double?) -> String {
            milliseconds.flatMap { AppleTimestamp.date(milliseconds: $0) }.map {
                JSONString.quote(Timestamp.rfc3339($0))
            } ?? "null"
        }
        var out = "{\"event_id\":\(string(eventID)),\"type\":\(string(type)),\"order_id\":\(string(grant.orderID))"
        out += ",\"user_id\":\(string(grant.userID)),\"product_id\":\(string(grant.productID))"
        out += ",\"quantity\":\(grant.quantity),\"transaction_id\":\(string(transaction?.transactionId))"
        out += ",\"original_transaction_id\":\(string(transaction?.originalTransactionId))"
        out += ",\"environment\":\(string(notification.environment?.rawValue))"
        if type == Self.revokedType {
            out += ",\"revocation_date\":\(time(transaction?.revocationDate))"
            out += ",\"revocation_reason\":\(transaction?.revocationReason.map(String.init) ?? "null")"
            out += ",\"revocation_type\":\(string(transaction?.revocationType))"
            out += ",\"revocation_percentage\":\(Self.percentage(milliunits: transaction?.revocationPercentage))"
        }
        out += ",\"notification_id\":\(string(notification.id))"
        out += ",\"notified_at\":\(JSONString.quote(Timestamp.rfc3339(notifiedAt)))"
        if type == Self.consumptionRequestedType {
            let respondBy = notifiedAt.addingTimeInterval(Self.consumptionDeadline)
            out += ",\"respond_by\":\(JSONString.quote(Timestamp.rfc3339(respondBy)))"
            out += ",\"consumption_request_reason\":\(string(notification.payload.data?.consumptionRequestReason))"
        }
        json = Data((out + "}").utf8)
    }

    /// Apple's milliunits (40000) as a percentage (40, or 67.932): null when absent (all of it). A value out
    /// of 0...100000 is clamped, never turned into null: null would tell a grant service to debit all.
    static func percentage(milliunits: Int?) -> String {
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

    func headers(source: String) -> [KafkaHeader] {
        Self.headers(eventID: eventID, type: type, time: Timestamp.rfc3339(notifiedAt), source: source)
    }

    /// CloudEvents 1.0, Kafka binary mode: the attributes as `ce_` headers (every event on the results topic).
    static func headers(eventID: String, type: String, time: String, source: String) -> [KafkaHeader] {
        [
            KafkaHeader(name: "ce_specversion", string: "1.0"), KafkaHeader(name: "ce_id", string: eventID),
            KafkaHeader(name: "ce_source", string: source), KafkaHeader(name: "ce_type", string: type),
            KafkaHeader(name: "ce_time", string: time),
            KafkaHeader(name: "content-type", string: "application/json"),
        ]
    }

    /// The headers of a stored event (a replay keeps its id, type and time).
    static func headers(storedJSON json: Data, source: String) -> [KafkaHeader] {
        let object = (try? JSONSerialization.jsonObject(with: json)) as? [String: Any] ?? [:]
        return headers(
            eventID: object["event_id"] as? String ?? "", type: object["type"] as? String ?? "",
            time: object["notified_at"] as? String ?? "", source: source)
    }
}
