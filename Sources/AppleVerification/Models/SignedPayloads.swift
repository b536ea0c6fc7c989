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
    }

    public var notificationType: String?
    public var subtype: String?
    public var notificationUUID: String?
    public var version: String?
    public var signedDate: Double?
    public var data: AppData?
    public var summary: AppData?
}
