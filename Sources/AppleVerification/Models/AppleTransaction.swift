import Foundation

/// One transaction as the worker's checks read it, whatever Apple source it came from.
public struct AppleTransaction: Sendable, Hashable {
    public var transactionID: String
    public var originalTransactionID: String?
    public var productID: String?
    public var quantity: Int
    public var appAccountToken: String?
    public var purchaseDate: Date?
    public var expiresDate: Date?
    /// A refund or revocation (`cancellation_date`, `revocationDate`).
    public var revocationDate: Date?
    /// Known for signed transactions; receipts say it only through `expires_date` (then a subscription).
    public var productType: ProductType

    public init(
        transactionID: String, originalTransactionID: String? = nil, productID: String? = nil, quantity: Int = 1,
        appAccountToken: String? = nil, purchaseDate: Date? = nil, expiresDate: Date? = nil,
        revocationDate: Date? = nil,
        productType: ProductType = .unknown
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.quantity = quantity
        self.appAccountToken = appAccountToken
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.productType = productType
    }

    public var isSubscription: Bool { productType.isSubscription || expiresDate != nil }

    init(_ transaction: JWSTransaction) {
        self.init(
            transactionID: transaction.transactionId ?? "", originalTransactionID: transaction.originalTransactionId,
            productID: transaction.productId, quantity: transaction.quantity ?? 1,
            appAccountToken: transaction.appAccountToken, purchaseDate: Self.date(transaction.purchaseDate),
            expiresDate: Self.date(transaction.expiresDate), revocationDate: Self.date(transaction.revocationDate),
            productType: transaction.productType)
    }

    init?(_ entry: VerifyReceiptResponse.InApp) {
        guard let id = entry.transactionId, !id.isEmpty else { return nil }
        self.init(
            transactionID: id, originalTransactionID: entry.originalTransactionId, productID: entry.productId,
            quantity: entry.quantity.flatMap { Int($0) } ?? 1, appAccountToken: entry.appAccountToken,
            purchaseDate: Self.date(entry.purchaseDateMs), expiresDate: Self.date(entry.expiresDateMs),
            revocationDate: Self.date(entry.cancellationDateMs))
    }

    static func date(_ milliseconds: Double?) -> Date? {
        milliseconds.map { Date(timeIntervalSince1970: $0 / 1000) }
    }

    static func date(_ milliseconds: String?) -> Date? {
        milliseconds.flatMap(Double.init).map { Date(timeIntervalSince1970: $0 / 1000) }
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
