public import Foundation
public import Vocabulary

/// One transaction as the worker's checks read it, whatever Apple source it came from.
///
/// Built only from values that were checked: every date is inside ``AppleTimestamp/validMilliseconds``, and
/// a source with an out-of-range or unreadable date or quantity is refused rather than read with the field
/// left out (a missing `cancellation_date` or `expires_date` would grant what must be denied).
public struct AppleTransaction: Sendable, Hashable {
    public var transactionID: String
    public var originalTransactionID: String?
    /// `webOrderLineItemId` (signed data) or `web_order_line_item_id` (verifyReceipt): one billing period of
    /// an auto-renewable subscription, the same id on every device and in every proof of that period.
    public var webOrderLineItemID: String?
    public var productID: String?
    public var quantity: Int
    public var appAccountToken: String?
    public var purchaseDate: Date?
    public var expiresDate: Date?
    /// A refund or revocation (`cancellation_date`, `revocationDate`).
    public var revocationDate: Date?
    /// The share refunded, in milliunits (`revocationPercentage`: 33,333 is a third); nil with a revocation is all
    /// of it (a receipt's `cancellation_date` says no share).
    public var revocationShare: Int?
    /// Signed data says it (`type`, raw value kept in ``ProductType/rawValue``). verifyReceipt entries do
    /// not: an entry with `expires_date_ms` or `web_order_line_item_id` is an auto-renewable subscription,
    /// any other `.unknown`.
    public var productType: ProductType
    /// Price, currency, storefront, reason and offer: what the purchase was worth (nil fields for a receipt).
    public var value = PurchaseValue()
    /// The player upgraded this subscription to another (`isUpgraded`, `is_upgraded`): Apple says the service is the
    /// upgrade's transaction's, and refunds what is left of this one.
    public var isUpgraded = false

    public init(
        transactionID: String, originalTransactionID: String? = nil, productID: String? = nil, quantity: Int = 1,
        appAccountToken: String? = nil, purchaseDate: Date? = nil, expiresDate: Date? = nil,
        revocationDate: Date? = nil,
        productType: ProductType = .unknown, webOrderLineItemID: String? = nil
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.webOrderLineItemID = webOrderLineItemID
        self.productID = productID
        self.quantity = quantity
        self.appAccountToken = appAccountToken
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.productType = productType
    }

    public var isSubscription: Bool { productType.isSubscription || expiresDate != nil }

    /// Refunded in part (a prorated refund below 100 %): the player keeps the rest, which is theirs to be granted.
    public var isPartlyRefunded: Bool { revocationDate != nil && (revocationShare ?? 100_000) < 100_000 }

    /// The purchase this transaction proves, as the ledger claims it (docs/contract.md §3, "Purchase identity"):
    /// two proofs of one purchase give one identity, whichever proof (signed transaction, Server API,
    /// receipt) and whichever device (a StoreKit 1 restore gives an old purchase a new `transaction_id`).
    ///
    /// | product type | identity |
    /// |---|---|
    /// | consumable, and any type Apple adds | its `transaction_id` |
    /// | non-consumable, non-renewing subscription | its `original_transaction_id`, else `transaction_id` |
    /// | auto-renewable subscription | its billing period (`web_order_line_item_id`), else `transaction_id` |
    /// | unknown (verifyReceipt entries without `expires_date_ms` or `web_order_line_item_id`) | its `original_transaction_id`, else `transaction_id` |
    ///
    /// ``PurchaseID`` keeps the id spaces apart: transaction ids (an `original_transaction_id` is one, the id of
    /// the first purchase, so a purchase claimed by its own id and later by a restore's `original_transaction_id`
    /// collides, as it must) and web order line items, a separate sequence whose numbers may equal a transaction id.
    ///
    /// verifyReceipt entries do not say whether a product is consumable. Their identity is the original
    /// transaction: a non-consumable restored on a new device (`original_transaction_id` differs from
    /// `transaction_id`) is then the purchase it restores, and a consumable, never restored, has its own id as
    /// its original, so it stays one purchase per transaction as the table asks.
    public var purchaseIdentity: PurchaseID {
        func nonEmpty(_ value: String?) -> String? { value.flatMap { $0.isEmpty ? nil : $0 } }
        switch productType {
        case .autoRenewableSubscription:
            if let line = nonEmpty(webOrderLineItemID) { return .billingPeriod(webOrderLineItemID: line) }
            return .transaction(transactionID)
        case .nonConsumable, .nonRenewingSubscription, .unknown:
            return .transaction(nonEmpty(originalTransactionID) ?? transactionID)
        case .consumable, .other:
            return .transaction(transactionID)
        }
    }

    /// A signed transaction's payload. Throws `.malformed` for a date outside ``AppleTimestamp``'s range.
    public init(_ transaction: JWSTransaction) throws(AppleVerificationError) {
        self.init(
            transactionID: transaction.transactionId ?? "", originalTransactionID: transaction.originalTransactionId,
            productID: transaction.productId, quantity: transaction.quantity ?? 1,
            appAccountToken: transaction.appAccountToken,
            purchaseDate: try Self.date(transaction.purchaseDate, "purchaseDate"),
            expiresDate: try Self.date(transaction.expiresDate, "expiresDate"),
            revocationDate: try Self.date(transaction.revocationDate, "revocationDate"),
            productType: transaction.productType, webOrderLineItemID: transaction.webOrderLineItemId)
        value = PurchaseValue(transaction)
        revocationShare = transaction.revocationPercentage.map { min(max($0, 0), 100_000) }
        isUpgraded = transaction.isUpgraded == true
    }

    /// A verifyReceipt entry; nil when it has no transaction id. Throws `.malformed` for a date or a
    /// quantity that is present but unreadable or out of range: the receipt is then invalid.
    init?(_ entry: VerifyReceiptResponse.InApp) throws(AppleVerificationError) {
        guard let id = entry.transactionId, !id.isEmpty else { return nil }
        if let field = entry.unreadableFields.first {
            throw AppleVerificationError(.malformed, "transaction \(id): \(field) is neither a string nor a number")
        }
        var quantity = 1
        if let text = entry.quantity {
            guard let value = Int(text), value >= 0 else {
                throw AppleVerificationError(.malformed, "transaction \(id): quantity is not a whole number")
            }
            quantity = value
        }
        let expires = try Self.date(entry.expiresDateMs, "expires_date_ms", id)
        let isAutoRenewable = entry.expiresDateMs != nil || entry.webOrderLineItemId != nil
        self.init(
            transactionID: id, originalTransactionID: entry.originalTransactionId, productID: entry.productId,
            quantity: quantity, appAccountToken: entry.appAccountToken,
            purchaseDate: try Self.date(entry.purchaseDateMs, "purchase_date_ms", id), expiresDate: expires,
            revocationDate: try Self.date(entry.cancellationDateMs, "cancellation_date_ms", id),
            productType: isAutoRenewable ? .autoRenewableSubscription : .unknown,
            webOrderLineItemID: entry.webOrderLineItemId)
        isUpgraded = entry.isUpgraded
    }

    /// This transaction completed with what `other`, another entry with the same `transaction_id`, adds.
    /// A refund or revocation in either wins (the earliest when both have one): verifyReceipt lists one
    /// purchase in `in_app` and in `latest_receipt_info`, and they need not agree.
    func merging(_ other: AppleTransaction) -> AppleTransaction {
        var merged = self
        merged.revocationDate = [revocationDate, other.revocationDate].compactMap { $0 }.min()
        merged.isUpgraded = isUpgraded || other.isUpgraded
        merged.originalTransactionID = originalTransactionID ?? other.originalTransactionID
        merged.webOrderLineItemID = webOrderLineItemID ?? other.webOrderLineItemID
        merged.productID = productID ?? other.productID
        merged.appAccountToken = appAccountToken ?? other.appAccountToken
        merged.purchaseDate = purchaseDate ?? other.purchaseDate
        merged.expiresDate = expiresDate ?? other.expiresDate
        if productType == .unknown { merged.productType = other.productType }
        return merged
    }

    private static func date(_ milliseconds: Double?, _ field: String) throws(AppleVerificationError) -> Date? {
        guard let milliseconds else { return nil }
        guard let date = AppleTimestamp.date(milliseconds: milliseconds) else {
            throw AppleVerificationError(.malformed, "\(field) is not a time from 1970 to 9999")
        }
        return date
    }

    private static func date(_ milliseconds: String?, _ field: String, _ id: String) throws(AppleVerificationError)
        -> Date?
    {
        guard let milliseconds else { return nil }
        guard let date = AppleTimestamp.date(millisecondsText: milliseconds) else {
            throw AppleVerificationError(
                .malformed, "transaction \(id): \(field) is not a time in milliseconds from 1970 to 9999")
        }
        return date
    }
}

/// A purchase proof Apple vouched for: its app, its environment, and the transactions it holds.
public struct VerifiedPurchase: Sendable {
    public enum Source: String, Sendable {
        case receipt, signedTransaction = "signed_transaction", serverAPI = "server_api"
    }

    public var source: Source
    public var bundleID: String?
    public var environment: AppleEnvironment
    /// Every transaction the proof holds: one for signed data, all entries of a receipt.
    public var transactions: [AppleTransaction]

    public init(source: Source, bundleID: String?, environment: AppleEnvironment, transactions: [AppleTransaction]) {
        self.source = source
        self.bundleID = bundleID
        self.environment = environment
        self.transactions = transactions
    }

    /// The transaction the contract says to check: the one with `transactionID` when given, else the
    /// newest for `productID`.
    public func select(transactionID: String?, productID: String) -> AppleTransaction? {
        if let transactionID { return transactions.first { $0.transactionID == transactionID } }
        return transactions.filter { $0.productID == productID }
            .max { ($0.purchaseDate ?? .distantPast) < ($1.purchaseDate ?? .distantPast) }
    }
}

extension AppleTransaction: CustomStringConvertible, CustomDebugStringConvertible {
    /// Ids, product and quantity: never the app account token, which authorises a bare transaction id, so an
    /// interpolated transaction in a log line or an error gives nothing away.
    public var description: String {
        "AppleTransaction(transactionID: \(transactionID), originalTransactionID: \(originalTransactionID ?? "nil"), "
            + "productID: \(productID ?? "nil"), quantity: \(quantity), appAccountToken: "
            + "\(appAccountToken == nil ? "nil" : "<set>"), productType: \(productType))"
    }

    public var debugDescription: String { description }
}
