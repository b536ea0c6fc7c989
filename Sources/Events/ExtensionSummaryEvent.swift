import AppleVerification
import Foundation
package import LedgerDomain
import Observability
import Vocabulary

/// `receipt.extension_completed` (docs/contract.md section 9): Apple finished a mass renewal-date extension
/// (RENEWAL_EXTENSION/SUMMARY): how many subscriptions it extended and how many it could not. Apple names the
/// request, not a purchase: the event is keyed by its `request_identifier`. Each subscription extended came before
/// it as a `receipt.renewal_changed` (`expires_at` moved), each one not as a `receipt.extension_failed`.
package enum ExtensionSummaryEvent {
    /// The event of a verified SUMMARY; nil without its request identifier.
    package static func make(_ notification: AppleNotification) -> StoredEvent? {
        guard let summary = notification.payload.summary, let request = summary.requestIdentifier,
            !request.isEmpty
        else { return nil }
        let at = notification.notifiedAt
        let type = EventType.extensionCompleted.rawValue
        let eventID = StableID.uuid("\(type)\u{0}\(notification.id)")
        let string = EventJSON.string
        var out = "{\"event_id\":\(string(eventID)),\"type\":\(string(type))"
        out += ",\"request_identifier\":\(string(request)),\"product_id\":\(string(summary.productId))"
        let storefronts = summary.storefrontCountryCodes.map {
            "[" + $0.map(JSONString.quote).joined(separator: ",") + "]"
        }
        out += ",\"storefront_country_codes\":\(storefronts ?? "null")"
        // Counts, never below zero (the schema's promise, whatever a payload says).
        let count = { (value: Int64?) in value.flatMap { $0 >= 0 ? String($0) : nil } ?? "null" }
        out += ",\"succeeded_count\":\(count(summary.succeededCount)),\"failed_count\":\(count(summary.failedCount))"
        out += ",\"bundle_id\":\(string(notification.bundleID.isEmpty ? nil : notification.bundleID))"
        out += ",\"environment\":\(string(notification.environment?.rawValue))"
        out += ",\"notification_id\":\(string(notification.id))"
        out += ",\"notified_at\":\(JSONString.quote(RFC3339.format(at)))}"
        return StoredEvent(eventID: eventID, type: type, time: RFC3339.format(at), key: request, json: Array(out.utf8))
    }
}
