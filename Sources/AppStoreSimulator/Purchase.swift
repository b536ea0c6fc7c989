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
    let appAccountToken: String?
    let purchaseDate: Date
    let expiresDate: Date?
    var revocationDate: Date?
    /// Apple's revocationReason (0 other, 1 an issue with the app) while revoked.
    var revocationReason: Int?
    /// Apple's revocationType while revoked: REFUND_FULL, REFUND_PRORATED or FAMILY_REVOKE.
    var revocationType: String?
    /// The share refunded or revoked, in milliunits (100000 is all), while revoked.
    var revocationPercentage: Int?
    /// A subscription's billing period: its own transaction id, or, for a restore, the restored one's.
    var webOrderLineItemID: String?
}

/// What a receipt token stands for: an app receipt with its purchases, or an iOS 6 transaction receipt.
struct ReceiptRecord: Sendable {
    let environment: String
    let bundleID: String
    let transactionIDs: [String]
    let ios6: Bool
}
