public import Foundation
public import Vocabulary

/// Where decisions are kept, so that no purchase is granted to two orders and a re-delivered job gets its
/// first answer again; what App Store notifications did to purchases; open consumption requests. Three narrow
/// views of it are what the worker's handlers are given: ``DecisionStore`` (jobs), ``PurchaseStateStore``
/// (notifications) and ``ConsumptionRequestStore`` (consumption answers).
///
/// Every key is scoped by app (``AppScope``): two games that both number their jobs and orders from 1 never
/// meet here. Purchases and their states are also scoped by environment: a Sandbox transaction is another
/// purchase than a Production one with the same id.
public protocol Ledger:
    DecisionStore, PurchaseStateStore, ConsumptionRequestStore, UnclaimedPurchaseStore, OffsetStore, SupportStore,
    DeskStore, LeaseStore, SubscriptionCheckStore
{
    /// The connection pool's state, for `/metrics` (nil: a ledger without a pool, SQLite's).
    var poolStats: LedgerPoolStats? { get }

    /// Deletes the results (stored for re-delivered jobs) decided before `cutoff`; returns how many. Grants are
    /// never deleted: they are what stops a purchase from being granted twice. A job delivered again after
    /// its result went is verified again, and its grant, if any, meets itself in the ledger: the same event.
    func pruneResults(decidedBefore cutoff: Date) async throws -> Int

    /// Deletes, in batches of 10,000, what outlived its retention (``Retention``): handled notifications, and
    /// what is settled. Returns how many rows, by kind. Grants, results (``pruneResults(decidedBefore:)``),
    /// revoked purchase states and waiting purchases are never deleted here.
    func prune(_ retention: Retention) async throws -> [Retention.Kind: Int]

    /// Whether the ledger answers, and takes writes (for `/readyz`).
    func ping() async throws

    func close() async
}

/// What the ledger's upkeep deletes after its time, besides stored results: each kind with its cutoff (nil:
/// kept). The rows each kind names are ``Retention/Kind``'s; the SQL of each ledger says the same.
public struct Retention: Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        /// Handled notifications (`ledger.notifications_retention_days`).
        case notifications
        /// Consumption requests whose deadline passed before the cutoff.
        case consumptionRequests = "consumption_requests"
        /// Reported purchases settled before the cutoff: claimed by a job, refunded, or credited and published.
        case unclaimedPurchases = "unclaimed_purchases"
        /// Purchase states last changed before the cutoff that are not revoked (reinstated): a refund is kept.
        case purchaseStates = "purchase_states"
    }

    public var notificationsBefore: Date?
    public var settledBefore: Date?

    public init(notificationsBefore: Date?, settledBefore: Date?) {
        self.notificationsBefore = notificationsBefore
        self.settledBefore = settledBefore
    }

    package func cutoff(_ kind: Kind) -> Date? { kind == .notifications ? notificationsBefore : settledBefore }
}

/// The job flow's view: a decision stored once per job, with the claim of its purchase and order.
public protocol DecisionStore: Sendable {
    /// The event stored for this job, if it was decided before: a re-delivered job is answered with it
    /// without asking Apple again. A result stored by a release without job fingerprints answers any
    /// fingerprint of its job id.
    func storedDecision(_ key: DecisionKey) async throws -> StoredEvent?

    /// Records the decision with its event, atomically with the claim. A job already recorded gets
    /// `.replay` with its stored event, whatever the claim now says.
    func record(_ decision: Decision) async throws -> ClaimVerdict

}

/// Purchases Apple reported (`ONE_TIME_CHARGE`, `SUBSCRIBED`) that no job claimed in time: credited by an event
/// of their own (``PurchaseRules/creditDue(now:limit:in:)``), published until the broker acknowledges it.
public protocol UnclaimedPurchaseStore: Sendable {
    /// Credits the purchases waiting since before `now` that no job claimed (and that were not refunded), at
    /// most `limit`; answers every credit not yet published, oldest first (those of earlier rounds too).
    func creditUnclaimed(now: Date, limit: Int) async throws -> [StoredEvent]

    /// Marks credits published (their events acknowledged by the broker).
    func markCreditsPublished(eventIDs: [String]) async throws

    /// How many reported purchases wait for a job or their time (for a gauge).
    func waitingUnclaimed() async throws -> Int
}

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

    public init(grant: GrantRecord, subscription: SubscriptionState? = nil, refundedBefore: Int? = 0) {
        self.grant = grant
        self.subscription = subscription
        self.refundedBefore = refundedBefore
    }
}

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
}

/// The consumption flow's view: the grant an answer is about, and the requests still open.
public protocol ConsumptionRequestStore: Sendable {
    /// The grant of a transaction (by its id), in `app` when given, else in any app; Production first.
    func grant(transactionID: String, app: AppScope?) async throws -> GrantRecord?

    /// Marks the consumption request of a transaction answered (sent, or refused for good).
    func answerConsumptionRequest(app: AppScope, environment: AppleEnvironment, transactionID: String) async throws

    /// When the oldest consumption request not yet answered and not yet past its deadline was made, per app (an
    /// app without one is absent).
    func oldestOpenConsumptionRequests() async throws -> [AppScope: Date]

    /// The requests of `app` no one answered (no answer taken by Apple, none received from a grant service) whose
    /// deadline comes before `dueBy` (and is not past at `now`), soonest first, at most `limit`: what an app's
    /// policy answers.
    func dueConsumptionRequests(app: AppScope, dueBy: Date, now: Date, limit: Int) async throws
        -> [OpenConsumptionRequest]

    /// Remembers that a grant service's answer to the request of a transaction reached the worker (before Apple
    /// took it): from then on the request is answered for an app's policy, whatever becomes of that answer.
    func consumptionAnswerReceived(app: AppScope, environment: AppleEnvironment, transactionID: String) async throws

    /// Whether the request of a transaction was answered: Apple took an answer, or a grant service's answer was
    /// received (sent, still being sent, or refused).
    func consumptionRequestAnswered(app: AppScope, environment: AppleEnvironment, transactionID: String)
        async throws -> Bool
}

/// A connection pool's state: connections allowed (`ledger.pool_size`), open, in use, callers waiting for one,
/// and how many acquisitions had to wait since start.
public struct LedgerPoolStats: Sendable, Equatable {
    public var size: Int
    public var open: Int
    public var inUse: Int
    public var waiting: Int
    public var waits: Int
    /// Statements sent to PostgreSQL since the pool opened, each a round trip.
    public var roundTrips: Int

    package init(size: Int, open: Int, inUse: Int, waiting: Int, waits: Int, roundTrips: Int) {
        self.size = size
        self.open = open
        self.inUse = inUse
        self.waiting = waiting
        self.waits = waits
        self.roundTrips = roundTrips
    }
}

extension Ledger {
    public var poolStats: LedgerPoolStats? { nil }
}

/// Which app a row belongs to: the app's bundle id, or "" for the default app (`apple.bundle_id`), whose rows
/// include those of a ledger written before keys were scoped by app that name no app (older than apps).
public struct AppScope: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public static let defaultApp = AppScope("")
    public var description: String { rawValue.isEmpty ? "default" : rawValue }
}

/// What identifies one job's decision: its app, its `job_id`, and its content's fingerprint, so a `job_id`
/// reused with other content (another order, product or proof) is another job, never the first one's replay.
public struct DecisionKey: Hashable, Sendable {
    public var app: AppScope
    public var jobID: String
    /// Hex SHA-256 of the job's content (the worker computes it); results stored before fingerprints have "".
    public var fingerprint: String

    public init(app: AppScope, jobID: String, fingerprint: String) {
        self.app = app
        self.jobID = jobID
        self.fingerprint = fingerprint
    }
}

/// An event as the ledger keeps it: its JSON exactly as published, and what its Kafka key and CloudEvents
/// headers are made of, so a replay publishes it again unchanged without reading the JSON back.
public struct StoredEvent: Sendable, Equatable {
    public var eventID: String
    /// The CloudEvents `ce_type` (`receipt.granted`, ...).
    public var type: String
    /// The CloudEvents `ce_time`, RFC 3339.
    public var time: String
    /// The Kafka key: the order the event is about.
    public var key: String
    public var json: [UInt8]
    /// Events published right after this one, as part of the same answer: the `receipt.revoked` that takes back
    /// the share Apple refunded of a purchase before it was granted (``Decision/refundFollowUp``).
    public var followUps: [StoredEvent] = []

    public init(eventID: String, type: String, time: String, key: String, json: [UInt8]) {
        self.eventID = eventID
        self.type = type
        self.time = time
        self.key = key
        self.json = json
    }

    /// This event, then its follow-ups, in the order they are published.
    public var published: [StoredEvent] { [self] + followUps }
}

/// What Apple refunded of a purchase before any order held it (a prorated refund: `revocationPercentage` below
/// 100 %), as the ledger remembers it: the share, in milliunits, and Apple's time of the refund.
public struct RefundTaken: Sendable, Equatable {
    public var share: Int
    public var at: Date
    /// The refund's revenue was taken back by an event before (the `receipt.revoked` of a credit the purchase is
    /// tied from): the follow-up takes back the share of the content, and none of the revenue again.
    public var revenueTaken: Bool

    public init(share: Int, at: Date, revenueTaken: Bool = false) {
        self.share = share
        self.at = at
        self.revenueTaken = revenueTaken
    }
}

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

/// The ledger's answer to a decision.
public enum ClaimVerdict: Sendable, Equatable {
    /// The decision and its event are stored.
    case recorded
    /// This job was decided before: here is its stored event, to publish again unchanged.
    case replay(StoredEvent)
    /// The purchase is already granted to another order.
    case duplicateTransaction
    /// The order is already granted with another purchase.
    case orderAlreadyFulfilled
    /// The purchase was granted, then refunded or revoked (an App Store notification said so).
    case revoked
    /// The order holds this purchase by a credit the worker made (a subscription's period, or a purchase no job
    /// claimed, tied to the order): the job is that credit, answered with its event id and what the credit counted
    /// as revenue; nothing was recorded.
    case credited(eventID: String, revenue: Int64?)
    /// Recorded, for a purchase Apple refunded in part before any order held it: granted for what the player
    /// kept, and `followUp` (stored with the decision) takes the refunded share back; publish both, in order.
    case recordedPartlyRefunded(followUp: StoredEvent)
    /// The order holds the purchase by a credit of the worker's, or took it now (a purchase credited unclaimed):
    /// answered with `answer`, made by ``Decision/creditAnswer`` and stored (its follow-ups, when the credit was
    /// refunded in part since, with it); publish it.
    case tied(StoredEvent)
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
        /// The refund was reversed: granted again.
        case reinstate(purchaseID: PurchaseID, transactionID: String, at: Date)
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

    public init(id: String, app: AppScope, environment: AppleEnvironment, kind: Kind) {
        self.id = id
        self.app = app
        self.environment = environment
        self.kind = kind
    }
}

/// How a notification was recorded, or how it was recorded before.
public enum NotificationRecord: Sendable, Equatable {
    /// Recorded now: the event to publish (nil: none), and whether the purchase has a grant here.
    case recorded(StoredEvent?, granted: Bool)
    /// Handled before: its stored event (nil: it produced none), to publish again unchanged.
    case replay(StoredEvent?)
}

/// A ledger failure: the decision was not stored. Retried, unless `isPermanent`: the database refuses the
/// values themselves (too long for an index, invalid text), which no retry will change.
public struct LedgerError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The database does not answer, refuses connections, or answered an error that can heal.
        public static let unavailable = Code("unavailable")
        /// The database refuses the values themselves: permanent.
        public static let valueRefused = Code("value_refused")
        /// Another writer decided the same job meanwhile: the retry finds its answer.
        public static let conflict = Code("conflict")
        /// The ledger's file was deleted or replaced under the worker.
        public static let replaced = Code("replaced")
        /// The ledger is closed.
        public static let closed = Code("closed")
        /// `ledger.url` or `ledger.schema` is not usable: a configuration error.
        public static let misconfigured = Code("misconfigured")
        /// The schema lacks migrations this role may not apply, or that this worker was told not to apply
        /// (`ledger.migrate_on_start=false`): waited for.
        public static let notMigrated = Code("not_migrated")
        /// A migration failed with the server answering (a lock never granted, a statement refused).
        public static let migrationFailed = Code("migration_failed")
    }

    public let code: Code
    public let reason: String
    /// The configuration key the error is about, when it is one (`ledger.url`).
    public let key: String?
    /// PostgreSQL's SQLSTATE, when the server answered one.
    public var sqlstate: String? = nil

    public var isPermanent: Bool { code == .valueRefused }

    public init(_ code: Code, _ reason: String, key: String? = nil) {
        self.code = code
        self.reason = reason
        self.key = key
    }

    public var description: String { "ledger: \(reason)" }

    /// The ledger records its default app's bundle id; opened with another `apple.bundle_id`, the default app's
    /// history would be read as another app's, and its purchases could be granted again (both ledgers refuse).
    package static func defaultAppMismatch(recorded: String, configured: String) -> LedgerError {
        LedgerError(
            .misconfigured,
            "this ledger's default app is \(recorded), and apple.bundle_id is \(configured): the default app's"
                + " purchases would be another app's (set apple.bundle_id=\(recorded), or use another ledger)",
            key: "apple.bundle_id")
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

    public init(
        originalTransactionID: String, state: SubscriptionState, renewal: Renewal?, unheld: ReportedPurchase? = nil
    ) {
        self.originalTransactionID = originalTransactionID
        self.state = state
        self.renewal = renewal
        self.unheld = unheld
    }
}

/// A purchase Apple reported, waiting for a job to claim it until `dueAt`; then credited by `event` (made when
/// the notification was handled, so every replica publishes the same bytes).
public struct ReportedPurchase: Sendable, Equatable {
    public var purchaseID: PurchaseID
    public var transactionID: String
    public var originalTransactionID: String?
    public var productID: String
    public var quantity: Int
    public var dueAt: Date
    /// The credit's event (`receipt.unclaimed`), keyed by ``creditOrderID``.
    public var event: StoredEvent
    /// What the credit counts as revenue (its event's `revenue`).
    public var revenue: Int64?

    public init(
        purchaseID: PurchaseID, transactionID: String, originalTransactionID: String?, productID: String, quantity: Int,
        dueAt: Date, event: StoredEvent, revenue: Int64? = nil
    ) {
        self.revenue = revenue
        self.purchaseID = purchaseID
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.quantity = quantity
        self.dueAt = dueAt
        self.event = event
    }

    /// The order a credit holds until a job ties it to its own: `unclaimed:` + the transaction id.
    public static func creditOrderID(transactionID: String) -> String {
        UnclaimedOrderID.of(transactionID: transactionID)
    }
}

/// A refund (consumption) request no grant service answered yet.
public struct OpenConsumptionRequest: Sendable, Equatable {
    public var environment: AppleEnvironment
    public var transactionID: String
    public var respondBy: Date

    public init(environment: AppleEnvironment, transactionID: String, respondBy: Date) {
        self.environment = environment
        self.transactionID = transactionID
        self.respondBy = respondBy
    }
}
