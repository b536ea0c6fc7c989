import Foundation

// What the simulator signs and answers for App Store Server Notifications V2, Get Notification History and Send
// Consumption Information, in Apple's field names. Optional fields left nil are left out, as Apple leaves them out.

/// `responseBodyV2DecodedPayload`.
struct NotificationPayloadV2: Encodable {
    let notificationType: String
    let subtype: String?
    let notificationUUID: String
    let version = "2.0"
    let signedDate: Int64
    var data: NotificationData? = nil
    /// RESCIND_CONSENT: the app's download instead of a purchase's `data`.
    var appData: AppDataPayload? = nil
    /// RENEWAL_EXTENSION/SUMMARY: a mass extension's outcome instead of a purchase's `data`.
    var summary: SummaryPayload? = nil
}

/// The notification's `appData` (RESCIND_CONSENT).
struct AppDataPayload: Encodable {
    let appAppleId: Int64
    let bundleId: String
    let environment: String
    let signedAppTransactionInfo: String
}

/// `JWSAppTransactionDecodedPayload`, the fields the simulator knows.
struct AppTransactionPayload: Encodable {
    let appTransactionId: String
    let bundleId: String
    let appAppleId: Int64
    let receiptType: String
    let applicationVersion = "1"
    let originalApplicationVersion = "1"
    let originalPurchaseDate: Int64
    let receiptCreationDate: Int64
    let signedDate: Int64
    let originalPlatform = "iOS"
}

/// The notification's `data`.
struct NotificationData: Encodable {
    let appAppleId: Int64
    let bundleId: String
    let bundleVersion: String
    let environment: String
    var signedTransactionInfo: String?
    var signedRenewalInfo: String?
    /// Auto-renewable subscriptions: 1 active, 2 expired, 5 revoked.
    var status: Int?
    /// CONSUMPTION_REQUEST: why the customer asked for a refund.
    var consumptionRequestReason: String?
}

/// `JWSRenewalInfoDecodedPayload`, the fields the simulator knows.
struct RenewalInfoPayload: Encodable {
    let originalTransactionId: String
    let autoRenewProductId: String
    let productId: String
    let autoRenewStatus: Int
    let signedDate: Int64
    let environment: String
    let recentSubscriptionStartDate: Int64
    let renewalDate: Int64?
    var isInBillingRetryPeriod: Bool? = nil
    var gracePeriodExpiresDate: Int64? = nil
    /// Why an expired subscription ended: 1 the customer cancelled, 2 billing error, 3 price increase not
    /// consented, 4 product not for sale.
    var expirationIntent: Int? = nil
}

/// `NotificationHistoryRequest`.
struct NotificationHistoryRequest: Decodable {
    let startDate: Int64?
    let endDate: Int64?
    let notificationType: String?
    let notificationSubtype: String?
    let transactionId: String?
    let onlyFailures: Bool?
}

/// `NotificationHistoryResponse`.
struct NotificationHistoryResponse: Encodable {
    struct Item: Encodable {
        struct SendAttempt: Encodable {
            let attemptDate: Int64
            let sendAttemptResult: String
        }

        let signedPayload: String
        let sendAttempts: [SendAttempt]
        /// Deprecated by Apple, still sent: the first attempt's result.
        let firstSendAttemptResult: String?
    }

    let notificationHistory: [Item]
    let hasMore: Bool
    let paginationToken: String?
}

/// A JSON value of the request body, kept as it was sent so that Apple's validation can tell `true` from `1`.
enum JSONScalar: Decodable, Equatable {
    case null, bool(Bool), integer(Int64), number(Double), string(String), other

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else {
            self = .other
        }
    }
}

/// Apple's enumerations for Send Consumption Information (`ConsumptionRequest`, version 2).
enum ConsumptionValues {
    static let deliveryStatuses: Set<String> = [
        "DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE",
        "UNDELIVERED_OTHER",
    ]
    static let refundPreferences: Set<String> = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]
}
