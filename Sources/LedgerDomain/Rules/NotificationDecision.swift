package import Foundation
package import Vocabulary

/// What a notification's facts are read for (``PurchaseRules/factsQuery(_:)``): whether it was handled, and the
/// purchase it names, under that purchase's lock when it may change it.
package struct PurchaseFactsQuery {
    package var notificationID: String
    /// The purchase, in its app and environment (nil: the notification names none, only whether it was handled
    /// is read).
    package var purchase: PurchaseKey?
    /// The transaction the notification names: the purchase's grant of it is read first.
    package var transactionID = ""
    /// Whether the purchase's lock is taken before its grant is read (the claim of a grant takes the same lock:
    /// a grant and a change of one purchase never interleave).
    package var locks = false
    /// Whether the purchase's last revoke or reinstate is read (and its row locked).
    package var readsState = false

    package init(
        notificationID: String, purchase: PurchaseKey? = nil, transactionID: String = "", locks: Bool = false,
        readsState: Bool = false
    ) {
        self.notificationID = notificationID
        self.purchase = purchase
        self.transactionID = transactionID
        self.locks = locks
        self.readsState = readsState
    }
}

/// What the ledger holds for a notification, read in its transaction (the `Ledger` target's `LedgerDialect.purchaseFacts`).
package struct PurchaseFacts {
    /// Handled before: what it published then.
    package var handled: HandledNotification?
    /// The purchase's grant here: of the transaction named, else of the purchase.
    package var grant: GrantRecord?
    /// The purchase's last revoke or reinstate.
    package var state: PurchaseState?

    package init(handled: HandledNotification? = nil, grant: GrantRecord? = nil, state: PurchaseState? = nil) {
        self.handled = handled
        self.grant = grant
        self.state = state
    }
}

/// A write ``PurchaseRules`` decided; its statements are the `Ledger` target's `PurchaseStatements.statements(for:)`.
package enum PurchaseWrite {
    /// A revoke or reinstate applied: the purchase's state, and its grants revoked or not. `share`: the share
    /// refunded in all (milliunits) while revoked.
    case state(PurchaseKey, transactionID: String, revoked: Bool, at: Date, share: Int?)
    /// A consumption request opened (or opened again) for a purchase granted here.
    case consumptionRequest(
        app: AppScope, environment: AppleEnvironment, transactionID: String, notificationID: String, respondBy: Date)
    /// A purchase Apple reported, kept until its due time for a job to claim it.
    case waitUnclaimed(app: AppScope, environment: AppleEnvironment, ReportedPurchase)
    /// A reported purchase whose credit was withheld for a refund since reversed: it waits again, due at once.
    case reopenUnclaimed(PurchaseKey)

    /// The tables it writes, by name: a decision's writes are run as one statement on PostgreSQL, where none sees
    /// another's rows, so no two of them may write one table.
    package var table: String {
        switch self {
        case .state: "purchase_states, grants"
        case .consumptionRequest: "consumption_requests"
        case .waitUnclaimed, .reopenUnclaimed: "unclaimed_purchases"
        }
    }
}

/// What a notification does, as ``PurchaseRules`` decided it: the writes, and the event wanted. The engine makes
/// the event (the one place that calls the flow's maker) and keeps it with the notification.
package struct NotificationDecision {
    package var writes: [PurchaseWrite] = []
    /// An event is wanted for this holder of the purchase.
    package var wanted: PurchaseHolder?
    /// The notification's own event (nothing of a purchase changes).
    package var notice: StoredEvent?
    /// Whether the purchase has a grant here.
    package var granted = false

    package init(
        writes: [PurchaseWrite] = [], wanted: PurchaseHolder? = nil, notice: StoredEvent? = nil, granted: Bool = false
    ) {
        self.writes = writes
        self.wanted = wanted
        self.notice = notice
        self.granted = granted
    }
}
