import Foundation

/// verifyReceipt's response body. Millisecond dates are strings, as Apple sends them; unknown fields are
/// ignored and every field is optional, so a change on Apple's side does not make a response undecodable.
public struct VerifyReceiptResponse: Decodable, Sendable {
    public var status: Int
    public var environment: String?
    public var receipt: Receipt?
    public var latestReceiptInfo: [InApp]?
    public var pendingRenewalInfo: [PendingRenewal]?
    public var isRetryable: Bool?

    enum CodingKeys: String, CodingKey {
        case status, environment, receipt
        case latestReceiptInfo = "latest_receipt_info"
        case pendingRenewalInfo = "pending_renewal_info"
        case isRetryable = "is_retryable"
        case isRetryableHyphen = "is-retryable"
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        status = try container.decode(Int.self, forKey: .status)
        environment = try? container.decodeIfPresent(String.self, forKey: .environment)
        receipt = try container.decodeIfPresent(Receipt.self, forKey: .receipt)
        latestReceiptInfo = try container.decodeIfPresent([InApp].self, forKey: .latestReceiptInfo)
        pendingRenewalInfo = try? container.decodeIfPresent([PendingRenewal].self, forKey: .pendingRenewalInfo)
        isRetryable = Self.flexibleBool(container, .isRetryable) ?? Self.flexibleBool(container, .isRetryableHyphen)
    }

    private static func flexibleBool(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) -> Bool? {
        if let value = try? container.decodeIfPresent(Bool.self, forKey: key) { return value }
        if let value = try? container.decodeIfPresent(Int.self, forKey: key) { return value != 0 }
        if let value = try? container.decodeIfPresent(String.self, forKey: key) {
            return value == "true" || value == "1"
        }
        return nil
    }

    /// An app receipt (iOS 7+) or, with `bid` and a flat `transaction_id`, an iOS 6 transaction receipt.
    public struct Receipt: Decodable, Sendable {
        public var bundleId: String?
        public var inApp: [InApp]?
        // iOS 6 transaction receipts carry one flat transaction.
        public var bid: String?
        public var uniqueIdentifier: String?
        public var ios6Transaction: InApp?

        enum CodingKeys: String, CodingKey {
            case bundleId = "bundle_id", inApp = "in_app", bid, uniqueIdentifier = "unique_identifier"
            case transactionId = "transaction_id"
        }

        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            bundleId = try container.decodeIfPresent(String.self, forKey: .bundleId)
            inApp = try container.decodeIfPresent([InApp].self, forKey: .inApp)
            bid = try container.decodeIfPresent(String.self, forKey: .bid)
            uniqueIdentifier = try container.decodeIfPresent(String.self, forKey: .uniqueIdentifier)
            ios6Transaction = container.contains(.transactionId) ? try InApp(from: decoder) : nil
        }
    }

    /// One purchase entry (`in_app`, `latest_receipt_info`, or an iOS 6 receipt).
    public struct InApp: Decodable, Sendable {
        public var quantity: String?
        public var productId: String?
        public var transactionId: String?
        public var originalTransactionId: String?
        public var purchaseDateMs: String?
        public var originalPurchaseDateMs: String?
        public var expiresDateMs: String?
        public var cancellationDateMs: String?
        public var webOrderLineItemId: String?
        public var appAccountToken: String?
        public var inAppOwnershipType: String?
        /// Fields present with a value that is neither a string nor a number (an object, a boolean). The
        /// entry is then unusable: reading such a field as absent could drop a cancellation.
        var unreadableFields: [String] = []

        enum CodingKeys: String, CodingKey {
            case quantity, productId = "product_id", transactionId = "transaction_id"
            case originalTransactionId = "original_transaction_id", purchaseDateMs = "purchase_date_ms"
            case originalPurchaseDateMs = "original_purchase_date_ms", expiresDateMs = "expires_date_ms"
            case cancellationDateMs = "cancellation_date_ms", webOrderLineItemId = "web_order_line_item_id"
            case appAccountToken = "app_account_token", inAppOwnershipType = "in_app_ownership_type"
        }

        /// Apple sends these as strings; old receipts sometimes as numbers. Both decode, as text: a number
        /// that is not a whole `Int64` (`1e30`, `1.5`) keeps its digits, for the reader of the field to refuse.
        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            var unreadable: [String] = []
            func text(_ key: CodingKeys) -> String? {
                guard container.contains(key), (try? container.decodeNil(forKey: key)) == false else { return nil }
                if let value = try? container.decode(String.self, forKey: key) { return value }
                if let value = try? container.decode(Int64.self, forKey: key) { return String(value) }
                if let value = try? container.decode(Double.self, forKey: key) { return String(value) }
                unreadable.append(key.stringValue)
                return nil
            }
            quantity = text(.quantity)
            productId = text(.productId)
            transactionId = text(.transactionId)
            originalTransactionId = text(.originalTransactionId)
            purchaseDateMs = text(.purchaseDateMs)
            originalPurchaseDateMs = text(.originalPurchaseDateMs)
            expiresDateMs = text(.expiresDateMs)
            cancellationDateMs = text(.cancellationDateMs)
            webOrderLineItemId = text(.webOrderLineItemId)
            appAccountToken = text(.appAccountToken)
            inAppOwnershipType = text(.inAppOwnershipType)
            unreadableFields = unreadable
        }
    }

    public struct PendingRenewal: Decodable, Sendable {
        public var autoRenewProductId: String?
        public var originalTransactionId: String?
        public var autoRenewStatus: String?

        enum CodingKeys: String, CodingKey {
            case autoRenewProductId = "auto_renew_product_id", originalTransactionId = "original_transaction_id"
            case autoRenewStatus = "auto_renew_status"
        }
    }
}
