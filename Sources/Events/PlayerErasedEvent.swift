package import Foundation
package import LedgerDomain
import Observability
import Vocabulary

/// `player.erased` (docs/contract.md section 11): a player's identifiers were replaced by a pseudonym in the
/// ledger; a grant service erases what it keeps of them. Keyed by the user id erased (the grant service's key for
/// its player), which the event carries for that purpose only; the ledger keeps the pseudonym alone.
package enum PlayerErasedEvent {
    package static func make(userID: String, pseudonym: String, app: AppScope, bundleID: String, at: Date)
        -> StoredEvent
    {
        let type = EventType.playerErased.rawValue
        let eventID = StableID.uuid("\(type)\u{0}\(app.rawValue)\u{0}\(pseudonym)")
        let string = EventJSON.string
        var out = "{\"event_id\":\(string(eventID)),\"type\":\(string(type)),\"user_id\":\(string(userID))"
        out += ",\"pseudonym\":\(string(pseudonym)),\"bundle_id\":\(string(bundleID.isEmpty ? nil : bundleID))"
        out += ",\"erased_at\":\(JSONString.quote(RFC3339.format(at)))}"
        return StoredEvent(eventID: eventID, type: type, time: RFC3339.format(at), key: userID, json: Array(out.utf8))
    }
}
