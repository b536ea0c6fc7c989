public import Foundation
public import Vocabulary

/// The notification flow's view: what a notification does to a purchase, decided in one place
/// (``PurchaseRules``) and applied in one transaction.
public protocol PurchaseStateStore: Sendable {
    /// The outcome stored for notification `id`, if it was handled before.
    func storedNotification(id: String) async throws -> NotificationRecord?

    /// Applies a notification's change and stores the event it produces, once per notification, atomically
    /// (``PurchaseRules``). `event` makes the event for the purchase's grant, when it has one in the
    /// notification's app and environment; it runs inside the transaction, so the event always names the
    /// order the ledger holds.
    func apply(_ change: NotificationChange, event: @escaping @Sendable (PurchaseHolder) -> StoredEvent?)
        async throws -> NotificationRecord
}

/// Who holds a purchase a notification is about: its grant, and for a subscription its state after the
/// notification (what the subscription's events say).
public struct PurchaseHolder: Sendable, Equatable {
    public var grant: GrantRecord
    public var subscription: SubscriptionState?
    /// For a refund or its reversal: the share of the purchase refunded before this change, in milliunits (0: none;
    /// nil: refunded by an amount a release before shares did not record).
    public var refundedBefore: Int?
    /// For a renewal whose period was credited before (by a job's grant, support's, or an earlier notification's
    /// credit): its event says the subscription's new state, never a second credit.
    public var stateOnly: Bool

    public init(
        grant: GrantRecord, subscription: SubscriptionState? = nil, refundedBefore: Int? = 0, stateOnly: Bool = false
    ) {
        self.grant = grant
        self.subscription = subscription
        self.refundedBefore = refundedBefore
        self.stateOnly = stateOnly
    }
}

/// A granted purchase, as the ledger holds it.
public struct GrantRecord: Sendable, Equatable {
    public var app: AppScope
    public var environment: AppleEnvironment
    public var orderID: String
    public var transactionID: String
    /// The granted order's player, product and quantity ("", "" and 1 for a grant recorded before the ledger
    /// kept them, whose event did not say).
    public var userID: String
    public var productID: String
    public var quantity: Int
    public var revoked: Bool
    /// When the consumption request of the transaction looked up must be answered by, if Apple made one.
    public var consumptionRespondBy: Date?
    /// What the sale counted as revenue (milliunits of its currency); nil: recorded by a release before it was kept.
    public var revenue: Int64?
    /// While revoked: the share refunded in all, in milliunits (100,000 when a release before shares recorded it).
    public var refundedShare: Int?

    /// Whether the grant is held by a credit of a purchase no job claimed that no job or support tied to an order
    /// yet (its order is ``ReportedPurchase/creditOrderID(transactionID:)``): no grant service has said it reached a
    /// player.
    public var isUntiedCredit: Bool { UnclaimedOrderID.isReserved(orderID) }

    /// Refunded in all (or revoked): nothing of it is left to the player.
    public var whollyRefunded: Bool { revoked && (refundedShare ?? 100_000) >= 100_000 }

    public init(
        app: AppScope, environment: AppleEnvironment, orderID: String, transactionID: String, userID: String,
        productID: String, quantity: Int, revoked: Bool, consumptionRespondBy: Date?, revenue: Int64? = nil,
        refundedShare: Int? = nil
    ) {
        self.revenue = revenue
        self.refundedShare = refundedShare
        self.app = app
        self.environment = environment
        self.orderID = orderID
        self.transactionID = transactionID
        self.userID = userID
        self.productID = productID
        self.quantity = quantity
        self.revoked = revoked
        self.consumptionRespondBy = consumptionRespondBy
    }
}
