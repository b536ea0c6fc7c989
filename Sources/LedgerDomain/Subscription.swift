public import Foundation
public import Vocabulary

/// A subscription's status, as the events and the ledger say it (Apple's `status` 1 to 5). Open: a status a later
/// release writes is kept as it is.
public struct SubscriptionStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let active = SubscriptionStatus(rawValue: "active")
    public static let expired = SubscriptionStatus(rawValue: "expired")
    /// Apple is retrying a failed renewal, without a grace period.
    public static let billingRetry = SubscriptionStatus(rawValue: "billing_retry")
    /// Apple is retrying a failed renewal, and the player keeps access until the grace period ends.
    public static let gracePeriod = SubscriptionStatus(rawValue: "grace_period")
    /// Refunded or revoked (Apple's status 5).
    public static let revoked = SubscriptionStatus(rawValue: "revoked")

    public var description: String { rawValue }
}

/// An auto-renewable subscription as the ledger knows it: the newest state Apple's notifications gave it
/// (ordered by their `signedDate`), and the latest expiry of any of its periods.
public struct SubscriptionState: Sendable, Equatable {
    public var status: SubscriptionStatus
    /// The latest `expiresDate` of its transactions seen (renewals and extensions move it; nothing moves it back).
    public var expiresAt: Date?
    /// Apple's `gracePeriodExpiresDate` while in a grace period.
    public var gracePeriodExpiresAt: Date?
    /// Apple's `autoRenewStatus` (nil: not said).
    public var autoRenew: Bool?
    /// The product the next period renews to (`autoRenewProductId`).
    public var autoRenewProductID: String?
    /// The `signedDate` of the newest notification applied.
    public var changedAt: Date

    public init(
        status: SubscriptionStatus, expiresAt: Date?, gracePeriodExpiresAt: Date?, autoRenew: Bool?,
        autoRenewProductID: String?,
        changedAt: Date
    ) {
        self.status = status
        self.expiresAt = expiresAt
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
        self.autoRenew = autoRenew
        self.autoRenewProductID = autoRenewProductID
        self.changedAt = changedAt
    }

    /// Whether this state entitles otherwise than `other`: its status, expiry or grace period, what a grant service
    /// sets the entitlement from. Times to the millisecond, as Apple signs them and the ledger keeps them (a time
    /// read back from the ledger is not the same `Double` as the one Apple's JSON gave).
    public func entitlesOtherwise(than other: SubscriptionState) -> Bool {
        func milliseconds(_ date: Date?) -> Int64? { date.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } }
        return status != other.status || milliseconds(expiresAt) != milliseconds(other.expiresAt)
            || milliseconds(gracePeriodExpiresAt) != milliseconds(other.gracePeriodExpiresAt)
    }
}

/// What a subscription notification says: the subscription (its original transaction), its state as of the
/// notification (`state.changedAt` is the notification's `signedDate`), and a renewal, when it is one: a new
/// purchase of the subscription (its billing period), credited to the order the subscription was granted to.
public struct SubscriptionChange: Sendable, Equatable {
    public struct Renewal: Sendable, Equatable {
        /// The period's purchase identity (``PurchaseID/billingPeriod(webOrderLineItemID:)``).
        public var purchaseID: PurchaseID
        public var transactionID: String
        public var productID: String
        public var quantity: Int
        /// The id of the period's credit (its `receipt.renewed`), kept with the grant: a job presenting the
        /// period for the order that holds it is answered with it.
        public var eventID: String
        /// What the period counts as revenue (its `receipt.renewed`'s `revenue`).
        public var revenue: Int64?

        public init(
            purchaseID: PurchaseID, transactionID: String, productID: String, quantity: Int, eventID: String,
            revenue: Int64? = nil
        ) {
            self.revenue = revenue
            self.purchaseID = purchaseID
            self.transactionID = transactionID
            self.productID = productID
            self.quantity = quantity
            self.eventID = eventID
        }
    }

    public var originalTransactionID: String
    public var state: SubscriptionState
    public var renewal: Renewal?
    /// A renewal of a subscription no order here holds (yet): kept as a reported purchase instead, credited by
    /// its own event if no job claims it in time (nil: dropped, `notifications.unclaimed_after_ms` is 0).
    public var unheld: ReportedPurchase?
    /// Apple's payment retry succeeded (`DID_RENEW`, `BILLING_RECOVERY`): the subscription's order heard of the
    /// billing issue, and hears of its end even when a job's grant to another order holds the period.
    public var recovery: Bool

    public init(
        originalTransactionID: String, state: SubscriptionState, renewal: Renewal?, unheld: ReportedPurchase? = nil,
        recovery: Bool = false
    ) {
        self.originalTransactionID = originalTransactionID
        self.state = state
        self.renewal = renewal
        self.unheld = unheld
        self.recovery = recovery
    }
}
