public import Foundation
public import Vocabulary

/// A job's decision, to record.
public struct Decision: Sendable {
    public var key: DecisionKey
    /// The grant to claim with it; nil for a deny, which claims nothing.
    public var grant: GrantClaim?
    public var event: StoredEvent
    /// Makes the event that takes back what Apple refunded of the purchase before it was granted (a prorated
    /// refund the ledger remembers): with it, such a purchase is granted for what the player kept and the refund
    /// is taken back at once (``ClaimVerdict/recordedPartlyRefunded(followUp:)``); without it, it is `revoked`.
    /// Stored with the decision, so a job delivered again publishes both again.
    public var refundFollowUp: (@Sendable (RefundTaken) -> StoredEvent)?
    /// A prorated refund Apple's own proof states (its `revocationPercentage` and `revocationDate`), which the ledger
    /// may not have heard of (the notification lost, notifications off): taken back as the ledger's would be, and
    /// remembered, so that the refund's notification, when it comes, takes nothing twice.
    public var appleRefund: RefundTaken?
    /// Makes the job's answer when its order holds the purchase by a credit of the worker's, or takes it now: a
    /// purchase credited unclaimed (section 9 of docs/contract.md) that no order held is tied to this order; one this
    /// order holds already (a renewal, a credit tied before) is the same credit. Made from the credit's event id and
    /// what the credit counted as revenue (both events of that id say the same), and stored as the job's answer
    /// (``ClaimVerdict/tied(_:)``). Without it, such a purchase is `duplicate_transaction` or
    /// ``ClaimVerdict/credited(eventID:revenue:)``.
    public var creditAnswer: (@Sendable (_ creditEventID: String, _ revenue: Int64?) -> StoredEvent)?

    public init(
        key: DecisionKey, grant: GrantClaim?, event: StoredEvent,
        refundFollowUp: (@Sendable (RefundTaken) -> StoredEvent)? = nil, appleRefund: RefundTaken? = nil,
        creditAnswer: (@Sendable (_ creditEventID: String, _ revenue: Int64?) -> StoredEvent)? = nil
    ) {
        self.key = key
        self.grant = grant
        self.event = event
        self.refundFollowUp = refundFollowUp
        self.appleRefund = appleRefund
        self.creditAnswer = creditAnswer
    }
}

extension Decision {
    /// The purchase its grant claims, in the decision's app; nil for a deny, which claims nothing.
    package var purchase: PurchaseKey? {
        grant.map { PurchaseKey(app: key.app, environment: $0.environment, purchaseID: $0.purchaseID) }
    }
}

/// A grant to claim: the purchase `purchaseID` (presented as `transactionID`) for `orderID`. It succeeds only if
/// the purchase was granted to no other order of the app in that environment, whatever transaction id it was
/// presented with (a StoreKit 1 restore gives an old purchase a new transaction id on each device), and the
/// order was granted with no other transaction.
public struct GrantClaim: Sendable, Equatable {
    public var orderID: String
    public var transactionID: String
    /// The purchase identity (docs/contract.md section 3); the transaction id for a consumable.
    public var purchaseID: PurchaseID
    public var environment: AppleEnvironment
    /// The granted order's player, product and quantity: what the events after the grant name.
    public var userID: String
    public var productID: String
    public var quantity: Int
    /// The subscription the purchase belongs to (Apple's `original_transaction_id`), when it is one.
    public var originalTransactionID: String?
    /// What the sale counts as revenue, in milliunits of its currency (the grant event's `revenue`): kept with the
    /// grant so that a refund takes back what the sale counted, and no more. Nil: not known.
    public var revenue: Int64?
    /// An auto-renewable subscription's period (its purchase date to its expiry): the ledger watches the
    /// subscription from its grant, so a renewal or an expiry never heard is asked of Apple
    /// (``SubscriptionCheckStore``). Nil for anything else.
    public var subscriptionPeriod: DateInterval?

    public init(
        orderID: String, transactionID: String, purchaseID: PurchaseID? = nil,
        environment: AppleEnvironment = .production,
        userID: String = "", productID: String = "", quantity: Int = 1, originalTransactionID: String? = nil,
        revenue: Int64? = nil, subscriptionPeriod: DateInterval? = nil
    ) {
        self.revenue = revenue
        self.subscriptionPeriod = subscriptionPeriod
        self.orderID = orderID
        self.transactionID = transactionID
        self.purchaseID = purchaseID ?? .transaction(transactionID)
        self.environment = environment
        self.userID = userID
        self.productID = productID
        self.quantity = quantity
        self.originalTransactionID = originalTransactionID
    }
}
