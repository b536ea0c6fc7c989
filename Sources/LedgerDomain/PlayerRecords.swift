public import Foundation
public import Vocabulary

/// Everything the ledger holds about one player of one app, for a data request (access, under the GDPR and the
/// CCPA): the purchases granted to them and each one's refund, subscription and refund-request state, the answers
/// to jobs that named them, the purchases Apple reported with their app account tokens, and the support desk's
/// audit lines about them. Read in one transaction.
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

        public init(id: String, at: Date?, state: String, event: [UInt8]) {
            self.id = id
            self.at = at
            self.state = state
            self.event = event
        }
    }

    public var grants: [Grant] = []
    public var refunds: [Refund] = []
    public var subscriptions: [SubscriptionRecord] = []
    public var refundRequests: [RefundRequest] = []
    public var answers: [Stored] = []
    public var reported: [Stored] = []
    public var audit: [AuditEntry] = []
    /// True when a list reached its bound: the document says the player has more than it shows.
    public var truncated = false

    public init() {}

    /// The app account tokens the player's records carry (lower case), from the events kept.
    public var appAccountTokens: [String] {
        var tokens = Set<String>()
        for event in grants.compactMap(\.event) + answers.map(\.event) + reported.map(\.event) {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(event))) as? [String: Any],
                let token = object["app_account_token"] as? String, !token.isEmpty
            else { continue }
            tokens.insert(token.lowercased())
        }
        return tokens.sorted()
    }
}
