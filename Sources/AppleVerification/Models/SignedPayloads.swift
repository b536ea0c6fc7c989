public import Vocabulary

/// The decoded payload of signed renewal info (`JWSRenewalInfoDecodedPayload`), the fields the worker reads.
public struct JWSRenewalInfo: Codable, Sendable, Hashable {
    public var originalTransactionId: String?
    public var autoRenewProductId: String?
    public var productId: String?
    public var autoRenewStatus: Int?
    public var expirationIntent: Int?
    public var isInBillingRetryPeriod: Bool?
    public var gracePeriodExpiresDate: Double?
    public var signedDate: Double?
    public var environment: AppleEnvironment?
    public var recentSubscriptionStartDate: Double?
    public var renewalDate: Double?

    public init() {}
}

/// The decoded payload of an App Store Server Notification V2 (`ResponseBodyV2DecodedPayload`).
public struct NotificationPayload: Codable, Sendable, Hashable {
    public struct AppData: Codable, Sendable, Hashable {
        public var appAppleId: Int64?
        public var bundleId: String?
        public var bundleVersion: String?
        public var environment: AppleEnvironment?
        public var signedTransactionInfo: String?
        public var signedRenewalInfo: String?
        public var status: Int?
        /// CONSUMPTION_REQUEST: why the customer asked for a refund (`UNINTENDED_PURCHASE`, ...).
        public var consumptionRequestReason: String?
        /// `appData` (RESCIND_CONSENT and later types): the app transaction, signed.
        public var signedAppTransactionInfo: String?
        /// `summary` (RENEWAL_EXTENSION/SUMMARY): the mass extension's product, identifier, storefronts (nil:
        /// all) and final counts.
        public var productId: String?
        public var requestIdentifier: String?
        public var storefrontCountryCodes: [String]?
        public var succeededCount: Int64?
        public var failedCount: Int64?

        public init() {}
    }

    /// `externalPurchaseToken` (EXTERNAL_PURCHASE_TOKEN): an external purchase's token, without `environment`
    /// (Apple's library reads Sandbox from an `externalPurchaseId` that starts with `SANDBOX`).
    public struct ExternalPurchaseToken: Codable, Sendable, Hashable {
        public var externalPurchaseId: String?
        public var tokenCreationDate: Double?
        public var appAppleId: Int64?
        public var bundleId: String?
    }

    public var notificationType: String?
    public var subtype: String?
    public var notificationUUID: String?
    public var version: String?
    public var signedDate: Double?
    public var data: AppData?
    public var summary: AppData?
    public var externalPurchaseToken: ExternalPurchaseToken?
    public var appData: AppData?

    /// An empty payload (filled field by field: a notification the worker makes itself from Apple's signed data,
    /// a subscription's status asked of Apple).
    public init() {}

    /// The members that name the notification's app, in the order Apple's library reads them.
    public static let appFields = ["data", "summary", "externalPurchaseToken", "appData"]

    /// The app and environment the notification is about, from whichever of `data`, `summary`,
    /// `externalPurchaseToken` or `appData` it carries (the first, as Apple's library reads them).
    public var app: (bundleID: String?, appAppleID: Int64?, environment: AppleEnvironment?)? {
        if let app = data ?? summary { return (app.bundleId, app.appAppleId, app.environment) }
        if let token = externalPurchaseToken {
            let sandbox = token.externalPurchaseId?.hasPrefix("SANDBOX") == true
            return (token.bundleId, token.appAppleId, sandbox ? .sandbox : .production)
        }
        if let app = appData { return (app.bundleId, app.appAppleId, app.environment) }
        return nil
    }
}

/// The decoded payload of a signed app transaction (`JWSAppTransactionDecodedPayload`), the fields the worker
/// reads: which download of the app it is, for whom Apple rescinds consent (RESCIND_CONSENT).
public struct JWSAppTransaction: Codable, Sendable, Hashable {
    public var appTransactionId: String?
    public var bundleId: String?
    public var appAppleId: Int64?
    /// `receiptType`: `Production`, `Sandbox` (or Xcode's).
    public var receiptType: String?
    public var originalPurchaseDate: Double?
    public var signedDate: Double?

    public init() {}
}
