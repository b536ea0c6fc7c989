public import Foundation
public import Vocabulary

/// What an App Store notification asks of the ledger: its id (Apple's `notificationUUID`), the app and
/// environment it is about, and the change. `at` is Apple's time of the change (the notification's
/// `signedDate`): a change older than the purchase's last one is stale and applies nothing, so a REFUND
/// delivered after the REFUND_REVERSED that undid it (Apple's retries, a backfill) cannot revoke.
public struct NotificationChange: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Nothing to change (a type the worker does not act on): remembered as handled.
        case none
        /// Nothing of a purchase changes, and the notification's own event goes out (RESCIND_CONSENT: about a
        /// download, not a purchase): remembered as handled with it.
        case notice(StoredEvent)
        /// Refunded or revoked: a later job presenting the purchase is denied `revoked`, even one that comes
        /// before any grant (the refund is remembered for a purchase not granted yet). `share`: how much of the
        /// purchase Apple has refunded in all, in milliunits (`revocationPercentage`; 100,000 when it says none).
        case revoke(purchaseID: PurchaseID, transactionID: String, at: Date, share: Int = 100_000)
        /// The refund was reversed: granted again. `period`: of a subscription's later period (its renewal's
        /// transaction), the renewal it was: refunded before any credit of it, it is credited now to the
        /// subscription's order (``PurchaseRules/creditReversedPeriod(_:facts:decided:in:)``).
        case reinstate(purchaseID: PurchaseID, transactionID: String, at: Date, period: SubscriptionChange? = nil)
        /// The player asked Apple for a refund; the answer is due by `respondBy`. Kept only for a purchase
        /// granted here: nobody else could answer it.
        case consumptionRequest(transactionID: String, respondBy: Date)
        /// A change of an auto-renewable subscription (its original transaction), maybe with a new period.
        case subscription(SubscriptionChange)
        /// Apple reported a purchase (`ONE_TIME_CHARGE`, `SUBSCRIBED`): credited by its own event if no job
        /// claims it by `dueAt`.
        case purchased(ReportedPurchase)
    }

    public var id: String
    public var app: AppScope
    public var environment: AppleEnvironment
    public var kind: Kind
    /// nil: Apple's notification (delivered, or found in its history); else what the worker made it from
    /// (`subscription_status`: Apple's answer about a subscription whose news never came). Only Apple's count as
    /// news from Apple when the sweep asks whether its deliveries stopped.
    public var source: String?

    public init(id: String, app: AppScope, environment: AppleEnvironment, kind: Kind, source: String? = nil) {
        self.id = id
        self.app = app
        self.environment = environment
        self.kind = kind
        self.source = source
    }
}

/// How a notification was recorded, or how it was recorded before.
public enum NotificationRecord: Sendable, Equatable {
    /// Recorded now: the event to publish (nil: none), and whether the purchase has a grant here.
    case recorded(StoredEvent?, granted: Bool)
    /// Handled before: its stored event (nil: it produced none), to publish again unchanged.
    case replay(StoredEvent?)
}
