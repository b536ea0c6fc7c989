import Foundation
import Vocabulary

/// verifyReceipt's response body. Millisecond dates are strings, as Apple sends them; unknown fields are
/// ignored and every field is optional, so a change on Apple's side does not make a response undecodable.
public struct VerifyReceiptResponse: Sendable {
    public var status: Int
    public var environment: String?
    public var receipt: Receipt?
    public var latestReceiptInfo: [InApp]?
    public var pendingRenewalInfo: [PendingRenewal]?
    public var isRetryable: Bool?

    /// An app receipt (iOS 7+) or, with `bid` and a flat `transaction_id`, an iOS 6 transaction receipt.
    public struct Receipt: Sendable {
        public var bundleId: String?
        public var inApp: [InApp]?
        // iOS 6 transaction receipts carry one flat transaction.
        public var bid: String?
        public var uniqueIdentifier: String?
        public var ios6Transaction: InApp?
    }

    /// One purchase entry (`in_app`, `latest_receipt_info`, or an iOS 6 receipt).
    public struct InApp: Sendable {
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
        public var inAppOwnershipType: InAppOwnershipType?
        /// `is_upgraded`: Apple writes `"true"` on a subscription's entry the player upgraded from (absent otherwise).
        public var isUpgraded = false
        /// Fields present with a value that is neither a string nor a number (an object, a boolean). The
        /// entry is then unusable: reading such a field as absent could drop a cancellation.
        var unreadableFields: [String] = []
    }

    public struct PendingRenewal: Sendable {
        public var autoRenewProductId: String?
        public var originalTransactionId: String?
        public var autoRenewStatus: String?
    }
}

// verifyReceipt's answer read with `JSONObjectScanner`, as the signed payloads are (JSONDecoder was a twentieth
// of a receipt job's CPU): unknown fields ignored, `null` as absent, an entry's fields read as text whether Apple
// wrote a string or a number, `environment` and `pending_renewal_info` of the wrong type ignored, any other
// value of the wrong type refused, and a key given twice refused.
extension VerifyReceiptResponse {
    /// Throws `.malformed` when `bytes` is not verifyReceipt's JSON.
    public init(json bytes: [UInt8]) throws(AppleVerificationError) {
        var status: Int?
        environment = nil
        receipt = nil
        latestReceiptInfo = nil
        pendingRenewalInfo = nil
        isRetryable = nil
        var retryable: Bool?
        var retryableHyphen: Bool?
        for member in try JSONField.members(of: bytes, subject: "verifyReceipt's answer") {
            switch member.key {
            case "status": status = try JSONField.integer(member)
            case "environment": environment = try? JSONField.string(member)
            case "receipt":
                receipt = try JSONField.object(member).map { members throws(AppleVerificationError) in
                    try Receipt(members)
                }
            case "latest_receipt_info": latestReceiptInfo = try Self.entries(member)
            case "pending_renewal_info": pendingRenewalInfo = try? Self.renewals(member)
            case "is_retryable": retryable = Self.flexibleBool(member)
            case "is-retryable": retryableHyphen = Self.flexibleBool(member)
            default: break
            }
        }
        guard let status else { throw AppleVerificationError(.malformed, "verifyReceipt's answer has no status") }
        self.status = status
        isRetryable = retryable ?? retryableHyphen
    }

    /// An array of entries, or nil for `null`.
    fileprivate static func entries(_ member: JSONObjectScanner.Member) throws(AppleVerificationError) -> [InApp]? {
        try objects(member)?.map(InApp.init)
    }

    private static func renewals(_ member: JSONObjectScanner.Member) throws(AppleVerificationError) -> [PendingRenewal]?
    {
        try objects(member)?.map { members throws(AppleVerificationError) in
            var renewal = PendingRenewal()
            for field in members {
                switch field.key {
                case "auto_renew_product_id": renewal.autoRenewProductId = try JSONField.string(field)
                case "original_transaction_id": renewal.originalTransactionId = try JSONField.string(field)
                case "auto_renew_status": renewal.autoRenewStatus = try JSONField.string(field)
                default: break
                }
            }
            return renewal
        }
    }

    /// The members of each object of an array, or nil for `null`; anything else is refused.
    private static func objects(_ member: JSONObjectScanner.Member) throws(AppleVerificationError)
        -> [[JSONObjectScanner.Member]]?
    {
        guard !member.raw.elementsEqual("null".utf8) else { return nil }
        guard let elements = JSONObjectScanner.elements(member.raw) else {
            throw AppleVerificationError(.malformed, "verifyReceipt's \(member.key) is not an array")
        }
        var objects: [[JSONObjectScanner.Member]] = []
        objects.reserveCapacity(elements.count)
        for element in elements {
            guard let members = JSONObjectScanner.members(element) else {
                throw AppleVerificationError(
                    .malformed, "verifyReceipt's \(member.key) holds a value that is not an object")
            }
            objects.append(members)
        }
        return objects
    }

    /// `true`/`false`, a number (not 0 is true), or the text `"true"`/`"1"`; nil otherwise.
    private static func flexibleBool(_ member: JSONObjectScanner.Member) -> Bool? {
        if let value = try? JSONField.bool(member) { return value }
        if let value: Int = try? JSONField.integer(member) { return value != 0 }
        if let value = try? JSONField.string(member) { return value == "true" || value == "1" }
        return nil
    }
}

extension VerifyReceiptResponse.Receipt {
    fileprivate init(_ members: [JSONObjectScanner.Member]) throws(AppleVerificationError) {
        for member in members {
            switch member.key {
            case "bundle_id": bundleId = try JSONField.string(member)
            case "in_app": inApp = try VerifyReceiptResponse.entries(member)
            case "bid": bid = try JSONField.string(member)
            case "unique_identifier": uniqueIdentifier = try JSONField.string(member)
            case "transaction_id": ios6Transaction = VerifyReceiptResponse.InApp(members)
            default: break
            }
        }
    }
}

extension VerifyReceiptResponse.InApp {
    /// Each field as text: a string, or a number's digits (an integral number as a whole number, as
    /// JSONDecoder read `1.0` as 1); any other value makes the field unreadable.
    fileprivate init(_ members: [JSONObjectScanner.Member]) {
        var unreadable: [String] = []
        func text(_ member: JSONObjectScanner.Member) -> String? {
            let raw = member.raw
            if raw.elementsEqual("null".utf8) { return nil }
            if raw.first == UInt8(ascii: "\""), let value = JSONStringToken.text(raw) { return value }
            if let first = raw.first, first == UInt8(ascii: "-") || (0x30...0x39).contains(first) {
                let digits = String(decoding: raw, as: UTF8.self)
                if let value = Int64(digits) { return String(value) }
                // An id past Int64 written as a plain integer: its digits as written, never a rounded double's
                // ("1e+20" would make two transactions one).
                if raw.dropFirst(first == UInt8(ascii: "-") ? 1 : 0).allSatisfy({ (0x30...0x39).contains($0) }) {
                    return digits
                }
                if let value = Double(digits), value.isFinite {
                    if value == value.rounded(), abs(value) < 9.2e18 { return String(Int64(value)) }
                    return String(value)
                }
            }
            unreadable.append(member.key)
            return nil
        }
        for member in members {
            switch member.key {
            case "quantity": quantity = text(member)
            case "product_id": productId = text(member)
            case "transaction_id": transactionId = text(member)
            case "original_transaction_id": originalTransactionId = text(member)
            case "purchase_date_ms": purchaseDateMs = text(member)
            case "original_purchase_date_ms": originalPurchaseDateMs = text(member)
            case "expires_date_ms": expiresDateMs = text(member)
            case "cancellation_date_ms": cancellationDateMs = text(member)
            case "web_order_line_item_id": webOrderLineItemId = text(member)
            case "app_account_token": appAccountToken = text(member)
            case "in_app_ownership_type": inAppOwnershipType = text(member).map(InAppOwnershipType.init)
            // A string in Apple's answers ("true"), read in any case, as a JSON boolean or number too. A value
            // neither true nor false is unreadable: read as false it would grant a period the player upgraded from.
            case "is_upgraded":
                // A string as every other field's (`text`, which marks one it cannot decode unreadable); a boolean,
                // a number or null as written.
                let raw = member.raw
                switch (raw.first == UInt8(ascii: "\"") ? text(member) : String(decoding: raw, as: UTF8.self))?
                    .lowercased()
                {
                case "true", "1", "1.0": isUpgraded = true
                case "false", "0", "0.0", "null": isUpgraded = false
                case nil: break
                default: unreadable.append(member.key)
                }
            default: break
            }
        }
        unreadableFields = unreadable
    }
}
