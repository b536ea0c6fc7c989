package import AppleVerification
package import Foundation
import Observability
import Vocabulary

/// The JSON of the hand-built events (ResultEvent, NotificationEvent, SubscriptionEvent and their kin): a string
/// quoted, a time in RFC 3339 with milliseconds, or `null` when absent. The static functions return a value's
/// text; an instance appends members to one buffer of UTF-8, for the events every job publishes.
package struct EventJSON {
    package private(set) var bytes: [UInt8] = []

    package var text: String { String(decoding: bytes, as: UTF8.self) }

    package init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// `prefix` (a member's name and what comes before it) then the string quoted, or `null`.
    package mutating func string(_ prefix: String, _ value: String?) {
        put(prefix)
        if let value { JSONString.append(quoted: value, to: &bytes) } else { put("null") }
    }

    package mutating func time(_ prefix: String, _ date: Date?) {
        put(prefix)
        if let date {
            bytes.append(UInt8(ascii: "\""))
            put(RFC3339.format(date))
            bytes.append(UInt8(ascii: "\""))
        } else {
            put("null")
        }
    }

    package mutating func number<T: BinaryInteger>(_ prefix: String, _ value: T?) {
        put(prefix)
        if let value { put(String(value)) } else { put("null") }
    }

    /// `prefix` then a word of the contract's own (an enumeration's raw value) in quotes: nothing to escape.
    package mutating func word(_ prefix: String, _ value: String) {
        put(prefix)
        bytes.append(UInt8(ascii: "\""))
        put(value)
        bytes.append(UInt8(ascii: "\""))
    }

    /// JSON text as it is (punctuation, a member's name, a value already JSON).
    package mutating func raw(_ json: String) { put(json) }

    private mutating func put(_ text: String) { bytes.append(contentsOf: text.utf8) }

    /// The members every event about a purchase carries of its worth (docs/contract.md, "What a purchase was
    /// worth"), each with a leading comma.
    package mutating func value(_ value: PurchaseValue) {
        number(",\"price\":", value.price)
        string(",\"currency\":", value.currency)
        string(",\"storefront\":", value.storefront)
        string(",\"transaction_reason\":", value.transactionReason)
        string(",\"in_app_ownership_type\":", value.ownershipType?.rawValue)
        number(",\"offer_type\":", value.offerType)
        string(",\"offer_identifier\":", value.offerIdentifier)
        string(",\"offer_discount_type\":", value.offerDiscountType)
        string(",\"offer_period\":", value.offerPeriod)
        string(",\"billing_plan_type\":", value.billingPlanType)
        raw(",\"commitment\":")
        raw(Self.commitment(value.commitment))
    }

    // A value's text alone, written by the members' own rules.
    package static func string(_ value: String?) -> String { alone { $0.string("", value) } }
    package static func time(_ date: Date?) -> String { alone { $0.time("", date) } }
    package static func number<T: BinaryInteger>(_ value: T?) -> String { alone { $0.number("", value) } }

    private static func alone(_ write: (inout EventJSON) -> Void) -> String {
        var out = EventJSON(capacity: 0)
        write(&out)
        return out.text
    }

    /// `revenue` (``Revenue``), with a leading comma: what the event adds to indicative revenue.
    package static func revenue(_ amount: Int64?) -> String { ",\"revenue\":\(number(amount))" }

    /// ``value(_:)``'s members as text of their own.
    package static func value(_ value: PurchaseValue) -> String { alone { $0.value(value) } }

    /// A monthly instalment's commitment: which instalment, of how many, until when, and the price after it.
    package static func commitment(_ commitment: TransactionCommitmentInfo?) -> String {
        guard let commitment else { return "null" }
        let expires = commitment.commitmentExpiresDate.flatMap { AppleTimestamp.date(milliseconds: $0) }
        return "{\"billing_period_number\":\(number(commitment.billingPeriodNumber)),"
            + "\"total_billing_periods\":\(number(commitment.totalBillingPeriods)),"
            + "\"expires_date\":\(string(expires.map(RFC3339.format))),"
            + "\"price_after\":\(number(commitment.commitmentPrice))}"
    }
}
