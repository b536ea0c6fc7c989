public import Foundation
public import Vocabulary

/// Everything the ledger holds about one player of one app, for a data request (access, under the GDPR and the
/// CCPA): the purchases granted to them and each one's refund, subscription, refund-request state and Apple's
/// report, the answers to jobs and the events of notifications that named them, credits held for them, and the
/// support desk's audit lines about them. Read in one transaction.
public struct PlayerRecords: Sendable {
    public struct Grant: Sendable {
        public var environment: AppleEnvironment
        public var transactionID: String
        public var originalTransactionID: String?
        public var orderID: String
        public var purchaseID: String
        public var productID: String?
        public var quantity: Int?
        /// `job`, `renewal` (a subscription's later period) or `unclaimed` (credited without a job).
        public var credit: String
        public var grantedAt: Date?
        public var revokedAt: Date?
        public var revenue: Int64?
        /// The event that credited it (JSON), when the ledger kept one.
        public var event: [UInt8]?

        public init(
            environment: AppleEnvironment, transactionID: String, originalTransactionID: String?, orderID: String,
            purchaseID: String, productID: String?, quantity: Int?, credit: String, grantedAt: Date?,
            revokedAt: Date?, revenue: Int64?, event: [UInt8]?
        ) {
            self.environment = environment
            self.transactionID = transactionID
            self.originalTransactionID = originalTransactionID
            self.orderID = orderID
            self.purchaseID = purchaseID
            self.productID = productID
            self.quantity = quantity
            self.credit = credit
            self.grantedAt = grantedAt
            self.revokedAt = revokedAt
            self.revenue = revenue
            self.event = event
        }
    }

    /// A granted purchase's last refund or reversal.
    public struct Refund: Sendable {
        public var environment: AppleEnvironment
        public var transactionID: String
        public var revoked: Bool
        /// The share refunded in all, in milliunits (100000 is all); nil: all.
        public var share: Int?
        public var changedAt: Date?

        public init(environment: AppleEnvironment, transactionID: String, revoked: Bool, share: Int?, changedAt: Date?)
        {
            self.environment = environment
            self.transactionID = transactionID
            self.revoked = revoked
            self.share = share
            self.changedAt = changedAt
        }
    }

    /// A subscription granted to the player, as the ledger knows it now.
    public struct SubscriptionRecord: Sendable {
        public var environment: AppleEnvironment
        public var originalTransactionID: String
        public var status: String
        public var expiresAt: Date?
        public var autoRenew: Bool?
        public var autoRenewProductID: String?
        public var changedAt: Date?

        public init(
            environment: AppleEnvironment, originalTransactionID: String, status: String, expiresAt: Date?,
            autoRenew: Bool?, autoRenewProductID: String?, changedAt: Date?
        ) {
            self.environment = environment
            self.originalTransactionID = originalTransactionID
            self.status = status
            self.expiresAt = expiresAt
            self.autoRenew = autoRenew
            self.autoRenewProductID = autoRenewProductID
            self.changedAt = changedAt
        }
    }

    /// Apple's request for consumption information about one of the player's purchases (a refund request).
    public struct RefundRequest: Sendable {
        public var environment: AppleEnvironment
        public var transactionID: String
        public var requestedAt: Date?
        public var respondBy: Date?
        public var answeredAt: Date?

        public init(
            environment: AppleEnvironment, transactionID: String, requestedAt: Date?, respondBy: Date?,
            answeredAt: Date?
        ) {
            self.environment = environment
            self.transactionID = transactionID
            self.requestedAt = requestedAt
            self.respondBy = respondBy
            self.answeredAt = answeredAt
        }
    }

    /// A stored event: a job's answer that named the player, or a purchase Apple reported with their token.
    public struct Stored: Sendable {
        /// The job's id, or the reported purchase's transaction id.
        public var id: String
        public var at: Date?
        /// A reported purchase's state (`waiting`, `credited`, `claimed`, `tied`, `refunded`); "" for an answer.
        public var state: String
        public var event: [UInt8]
        /// A held credit's app (the desk's name of it); "" for the others.
        public var app: String

        public init(id: String, at: Date?, state: String, event: [UInt8], app: String = "") {
            self.id = id
            self.at = at
            self.state = state
            self.event = event
            self.app = app
        }
    }

    public var grants: [Grant] = []
    public var refunds: [Refund] = []
    public var subscriptions: [SubscriptionRecord] = []
    public var refundRequests: [RefundRequest] = []
    public var answers: [Stored] = []
    /// The events of Apple's notifications about the player's purchases (a refund, a renewal, ...), as long as
    /// `ledger.notifications_retention_days` keeps them; `id` is Apple's notification id.
    public var notices: [Stored] = []
    /// Apple's reports of the player's purchases (by the grants' keys).
    public var reported: [Stored] = []
    /// Credits for the player held for a lead: `id` the approval's, `state` its status, `event` the request (JSON).
    public var heldCredits: [Stored] = []
    public var audit: [AuditEntry] = []
    /// True when a list reached its bound: the document says the player has more than it shows.
    public var truncated = false

    public init() {}
}
