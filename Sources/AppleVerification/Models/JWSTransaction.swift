import Foundation
public import Vocabulary

/// The decoded payload of a StoreKit 2 signed transaction (`JWSTransactionDecodedPayload`).
///
/// Every field is optional, as in Apple's libraries: Apple omits what does not apply. Values with a fixed set
/// of meanings keep Apple's raw value; a typed accessor reads it, so a value Apple adds later still decodes.
/// Dates are milliseconds since the epoch, fractional in Xcode's StoreKit testing.
public struct JWSTransaction: Codable, Sendable, Hashable {
    public var transactionId: String?
    public var originalTransactionId: String?
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var productId: String?
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Double?
    public var originalPurchaseDate: Double?
    public var expiresDate: Double?
    public var quantity: Int?
    /// Raw `type`: "Consumable", "Non-Consumable", "Auto-Renewable Subscription", "Non-Renewing Subscription".
    public var type: String?
    public var appAccountToken: String?
    public var inAppOwnershipType: InAppOwnershipType?
    public var signedDate: Double?
    public var revocationReason: RevocationReason?
    public var revocationDate: Double?
    /// `REFUND_FULL`, `REFUND_PRORATED`, `FAMILY_REVOKE` (raw: a type Apple adds later still decodes).
    public var revocationType: RevocationType?
    /// The refunded or revoked share, in milliunits (40000 is 40 %); absent means all, or not revoked.
    public var revocationPercentage: Int?
    public var isUpgraded: Bool?
    public var offerType: Int?
    public var offerIdentifier: String?
    public var environment: AppleEnvironment?
    public var storefront: String?
    public var storefrontId: String?
    public var transactionReason: String?
    public var currency: String?
    /// Price in milli-units of `currency`.
    public var price: Int64?
    public var offerDiscountType: String?
    public var appTransactionId: String?
    public var offerPeriod: String?
    /// `MONTHLY` (a subscription paid month by month within a commitment) or `BILLED_UPFRONT` (raw: a plan Apple
    /// adds later still decodes). App Store Server API 1.21.
    public var billingPlanType: String?
    /// The commitment a monthly instalment belongs to (a monthly subscription with a 12-month commitment).
    public var commitmentInfo: TransactionCommitmentInfo?

    public var productType: ProductType { ProductType(rawValue: type) }

    public init() {}
}

/// Apple's `TransactionCommitmentInfo`: which instalment of a commitment a transaction is, and when and at what
/// price the commitment ends.
public struct TransactionCommitmentInfo: Codable, Sendable, Hashable {
    /// This instalment's number, 1 to `totalBillingPeriods`.
    public var billingPeriodNumber: Int?
    /// The instalments of the commitment (12 for a year paid monthly).
    public var totalBillingPeriods: Int?
    /// When the commitment ends, milliseconds since the epoch.
    public var commitmentExpiresDate: Double?
    /// The subscription's price after the commitment, in milliunits.
    public var commitmentPrice: Int64?

    public init(
        billingPeriodNumber: Int? = nil, totalBillingPeriods: Int? = nil, commitmentExpiresDate: Double? = nil,
        commitmentPrice: Int64? = nil
    ) {
        self.billingPeriodNumber = billingPeriodNumber
        self.totalBillingPeriods = totalBillingPeriods
        self.commitmentExpiresDate = commitmentExpiresDate
        self.commitmentPrice = commitmentPrice
    }
}

/// An in-app product's type. `other` keeps a value Apple adds later.
public enum ProductType: Hashable, Sendable {
    case consumable, nonConsumable, autoRenewableSubscription, nonRenewingSubscription
    case other(String)
    case unknown

    public init(rawValue: String?) {
        switch rawValue {
        case "Consumable": self = .consumable
        case "Non-Consumable": self = .nonConsumable
        case "Auto-Renewable Subscription": self = .autoRenewableSubscription
        case "Non-Renewing Subscription": self = .nonRenewingSubscription
        case nil: self = .unknown
        case let value?: self = .other(value)
        }
    }

    /// Apple's `type` string for this type: a type Apple adds later is kept as sent; nil for `.unknown`.
    public var rawValue: String? {
        switch self {
        case .consumable: "Consumable"
        case .nonConsumable: "Non-Consumable"
        case .autoRenewableSubscription: "Auto-Renewable Subscription"
        case .nonRenewingSubscription: "Non-Renewing Subscription"
        case .other(let value): value
        case .unknown: nil
        }
    }

    public var isSubscription: Bool { self == .autoRenewableSubscription || self == .nonRenewingSubscription }
}
