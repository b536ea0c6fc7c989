package import AppleVerification
package import Foundation
import Observability
import Vocabulary

/// The JSON of the hand-built events (ResultEvent, NotificationEvent, SubscriptionEvent and their kin): a string
/// quoted, a time in RFC 3339 with milliseconds, or `null` when absent. The static functions return a value's
/// text; an instance appends members to one string, for the events every job publishes.
package struct EventJSON {
    package private(set) var text = ""

    package init(capacity: Int) { text.reserveCapacity(capacity) }

    /// `prefix` (a member's name and what comes before it) then the string quoted, or `null`.
    package mutating func string(_ prefix: String, _ value: String?) {
        text += prefix
        if let value { JSONString.append(quoted: value, to: &text) } else { text += "null" }
    }

    package mutating func time(_ prefix: String, _ date: Date?) {
        text += prefix
        if let date {
            text += "\""
            text += RFC3339.format(date)
            text += "\""
        } else {
            text += "null"
        }
    }

    package mutating func number<T: BinaryInteger>(_ prefix: String, _ value: T?) {
        text += prefix
        if let value { text += String(value) } else { text += "null" }
    }

    /// `prefix` then a word of the contract's own (an enumeration's raw value) in quotes: nothing to escape.
    package mutating func word(_ prefix: String, _ value: String) {
        text += prefix
        text += "\""
        text += value
        text += "\""
    }

    /// JSON text as it is (punctuation, a member's name, a value already JSON).
    package mutating func raw(_ json: String) { text += json }

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
