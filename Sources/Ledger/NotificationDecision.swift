import Foundation
import Vocabulary

/// What a notification's facts are read for (``PurchaseRules/factsQuery(_:)``): whether it was handled, and the
/// purchase it names, under that purchase's lock when it may change it.
struct PurchaseFactsQuery {
    var notificationID: String
    /// The purchase, in its app and environment (nil: the notification names none, only whether it was handled
    /// is read).
    var purchase: PurchaseKey?
    /// The transaction the notification names: the purchase's grant of it is read first.
    var transactionID = ""
    /// Whether the purchase's lock is taken before its grant is read (the claim of a grant takes the same lock:
    /// a grant and a change of one purchase never interleave).
    var locks = false
    /// Whether the purchase's last revoke or reinstate is read (and its row locked).
    var readsState = false
}

/// What the ledger holds for a notification, read in its transaction (``LedgerDialect/purchaseFacts(_:in:)``).
struct PurchaseFacts {
    /// Handled before: what it published then.
    var handled: HandledNotification?
    /// The purchase's grant here: of the transaction named, else of the purchase.
    var grant: GrantRecord?
    /// The purchase's last revoke or reinstate.
    var state: PurchaseState?
}

/// A write ``PurchaseRules`` decided; its statements are ``PurchaseStatements/statements(for:)``.
enum PurchaseWrite {
    /// A revoke or reinstate applied: the purchase's state, and its grants revoked or not. `share`: the share
    /// refunded in all (milliunits) while revoked.
    case state(PurchaseKey, transactionID: String, revoked: Bool, at: Date, share: Int?)
    /// A consumption request opened (or opened again) for a purchase granted here.
    case consumptionRequest(
        app: AppScope, environment: AppleEnvironment, transactionID: String, notificationID: String, respondBy: Date)
    /// A purchase Apple reported, kept until its due time for a job to claim it.
    case waitUnclaimed(app: AppScope, environment: AppleEnvironment, ReportedPurchase)

    /// The tables it writes, by name: a decision's writes are run as one statement on PostgreSQL, where none sees
    /// another's rows, so no two of them may write one table.
    var table: String {
        switch self {
        case .state: "purchase_states, grants"
        case .consumptionRequest: "consumption_requests"
        case .waitUnclaimed: "unclaimed_purchases"
        }
    }
}

/// What a notification does, as ``PurchaseRules`` decided it: the writes, and the event wanted. The engine makes
/// the event (the one place that calls the flow's maker) and keeps it with the notification.
struct NotificationDecision {
    var writes: [PurchaseWrite] = []
    /// An event is wanted for this holder of the purchase.
    var wanted: PurchaseHolder?
    /// The notification's own event (nothing of a purchase changes).
    var notice: StoredEvent?
    /// Whether the purchase has a grant here.
    var granted = false
}
