import AppleVerification
import Foundation

/// One purchase the simulator knows, as the admin API created it.
struct Purchase: Sendable {
    enum Kind: String, Sendable {
        case consumable, nonConsumable = "non_consumable", subscription

        var appleType: String {
            switch self {
            case .consumable: "Consumable"
            case .nonConsumable: "Non-Consumable"
            case .subscription: "Auto-Renewable Subscription"
            }
        }
    }

    let transactionID: String
    let originalTransactionID: String
    let bundleID: String
    let productID: String
    let kind: Kind
    let environment: String
    let quantity: Int
    /// Set at purchase, or later by Set App Account Token.
    var appAccountToken: String?
    let purchaseDate: Date
    var expiresDate: Date?
    var revocationDate: Date?
    /// Apple's revocationReason (0 other, 1 an issue with the app) while revoked.
    var revocationReason: Int?
    /// Apple's revocationType while revoked: REFUND_FULL, REFUND_PRORATED or FAMILY_REVOKE.
    var revocationType: String?
    /// The share refunded or revoked, in milliunits (100000 is all), while revoked.
    var revocationPercentage: Int?
    /// A subscription's billing period: its own transaction id, or, for a restore, the restored one's.
    var webOrderLineItemID: String?
    /// A subscription's renewal state, as its `signedRenewalInfo` says it.
    var autoRenew = true
    var billingRetry = false
    var gracePeriodExpiresDate: Date? = nil
    /// Why the subscription expired (the renewal info's `expirationIntent`), once it did.
    var expirationIntent: Int? = nil
    /// Apple's `inAppOwnershipType`: `PURCHASED`, or `FAMILY_SHARED` for a family member's access to it.
    var ownership = "PURCHASED"
    /// The order id on the customer's invoice email (Look Up Order ID finds the order's transactions by it).
    var orderID = ""
    /// The Apple Account that bought it: Get Transaction History answers every purchase of its customer in the
    /// app from any one transaction id.
    var customer = ""
    /// What it cost: milliunits of `currency`, the storefront, and the offer it was bought with, if any.
    var price: Int64 = 990
    var currency = "USD"
    var storefront = "USA"
    var offerType: Int? = nil
    var offerIdentifier: String? = nil
    var offerDiscountType: String? = nil
    var offerPeriod: String? = nil
    /// Whether the server said it finished the transaction (Finish Transaction).
    var finished = false
    /// A subscription paid month by month within a commitment: `MONTHLY`, and which instalment this is.
    var billingPlanType: String? = nil
    var commitment: TransactionCommitmentInfo? = nil

    /// Apple's `data.status` of a subscription notification: 1 active, 2 expired, 3 billing retry, 4 grace
    /// period, 5 revoked.
    func subscriptionStatus(at now: Date) -> Int {
        if revocationDate != nil { return 5 }
        if let grace = gracePeriodExpiresDate, grace > now { return 4 }
        if billingRetry { return 3 }
        return expiresDate.map { $0 < now } == true ? 2 : 1
    }
}

/// What a receipt token stands for: an app receipt with its purchases, or an iOS 6 transaction receipt.
struct ReceiptRecord: Sendable {
    let environment: String
    let bundleID: String
    let transactionIDs: [String]
    let ios6: Bool
}
