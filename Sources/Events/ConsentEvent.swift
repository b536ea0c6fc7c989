import Vocabulary
import AppleVerification
import Foundation
package import LedgerDomain
import Observability

/// `receipt.consent_rescinded` (docs/contract.md): a parent withdrew the consent a minor's account needs
/// (RESCIND_CONSENT, App Store Server Notifications 2.19; in force for new Texas accounts since June 2026). Apple
/// stops the app from launching for that download; the game's backend must end the player's sessions and the
/// data kept under that consent. Apple names the download (its app transaction id), not a purchase: the event is
/// keyed by it, and a backend that keeps `app_transaction_id` with its players (StoreKit's AppTransaction, or
/// any transaction's `appTransactionId`) finds the player.
package enum ConsentEvent {

    /// The event of a verified RESCIND_CONSENT; nil without its app transaction.
    package static func make(_ notification: AppleNotification) -> StoredEvent? {
        guard let app = notification.appTransaction, let appTransactionID = app.appTransactionId else { return nil }
        let at = notification.notifiedAt
        let type = EventType.consentRescinded.rawValue
        let eventID = StableID.uuid("\(type)\u{0}\(notification.id)")
        let string = EventJSON.string
        var out = "{\"event_id\":\(string(eventID)),\"type\":\(string(type))"
        out += ",\"app_transaction_id\":\(string(appTransactionID))"
        out += ",\"bundle_id\":\(string(notification.bundleID.isEmpty ? nil : notification.bundleID))"
        out += ",\"environment\":\(string(notification.environment?.rawValue))"
        out += ",\"notification_id\":\(string(notification.id))"
        out += ",\"notified_at\":\(JSONString.quote(RFC3339.format(at)))}"
        return StoredEvent(
            eventID: eventID, type: type, time: RFC3339.format(at), key: appTransactionID, json: Array(out.utf8))
    }
}
