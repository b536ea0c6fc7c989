import Foundation

/// What the app sent as proof of purchase.
public enum PurchaseProof: Sendable, Equatable {
    /// An app receipt or an iOS 6 transaction receipt, base64, as sent to verifyReceipt.
    case receipt(String)
    /// StoreKit 2 `Transaction.jwsRepresentation`.
    case signedTransaction(String)
    /// A transaction id alone, looked up with the App Store Server API.
    case transactionID(String)
}

/// Apple's verdict on a proof, before the order checks.
public enum AppleVerdict: Sendable {
    case verified(VerifiedPurchase)
    case rejected(AppleRejection, detail: String)
}

/// The first failing check of the contract that belongs to Apple's answer. Raw values are deny reasons.
public enum AppleRejection: String, Sendable {
    case invalidReceipt = "invalid_receipt"
    case bundleMismatch = "bundle_mismatch"
    case sandboxNotAllowed = "sandbox_not_allowed"
    case transactionNotFound = "transaction_not_found"
}

/// Verifies any proof through the right Apple path and normalises the answer. Transient failures throw a
/// retriable ``AppleVerificationError`` and are never a rejection.
public final class AppleVerifier: Sendable {
    public let bundleID: String
    private let receipts: VerifyReceiptClient
    /// The App Store Server API, when a key is configured (consumption answers and history use it too).
    public let api: AppStoreServerAPIClient?
    /// Verifies signed transactions, renewal info and notifications.
    public let signedData: SignedDataVerifier

    public init(
        bundleID: String, receipts: VerifyReceiptClient, api: AppStoreServerAPIClient?,
        signedData: SignedDataVerifier
    ) {
        self.bundleID = bundleID
        self.receipts = receipts
        self.api = api
        self.signedData = signedData
    }

    /// `attempts` counts calls made to Apple, retries of the caller included when it passes the same counter.
    public func verify(_ proof: PurchaseProof, attempts: inout Int) async throws -> AppleVerdict {
        switch proof {
        case .receipt(let receipt):
            return try await verifyReceipt(receipt, attempts: &attempts)
        case .signedTransaction(let jws):
            return verifySigned(jws, source: .signedTransaction)
        case .transactionID(let id):
            guard let api else {
                throw AppleVerificationError(.invalidKey, "no App Store Server API key is configured (apple.api.*)")
            }
            switch try await api.transactionInfo(id: id, attempts: &attempts) {
            case .found(let jws): return verifySigned(jws, source: .serverAPI)
            case .notFound: return .rejected(.transactionNotFound, detail: "Apple knows no transaction \(id)")
            case .rejected(let code):
                return .rejected(.transactionNotFound, detail: "Apple refused the transaction id (error \(code))")
            }
        }
    }

    private func verifyReceipt(_ receipt: String, attempts: inout Int) async throws -> AppleVerdict {
        switch try await receipts.verify(receipt: receipt, attempts: &attempts) {
        case .sandboxNotAllowed:
            return .rejected(.sandboxNotAllowed, detail: "a sandbox receipt, and apple.allow_sandbox is false")
        case .invalid(let status):
            return .rejected(
                .invalidReceipt, detail: "verifyReceipt status \(status): \(VerifyReceiptStatus.describe(status))")
        case .valid(let response, let environment):
            return Self.verdict(onReceipt: response, environment: environment, bundleID: bundleID)
        }
    }

    /// The verdict on a valid verifyReceipt answer. Every entry of `in_app`, `latest_receipt_info` and an
    /// iOS 6 receipt is read; entries with one `transaction_id` are merged, a cancellation in either winning.
    /// An entry with an unreadable or out-of-range date or quantity makes the whole receipt invalid: leaving
    /// the field out could grant a cancelled or expired purchase, and Apple never sends such an entry.
    static func verdict(onReceipt response: VerifyReceiptResponse, environment: String, bundleID: String)
        -> AppleVerdict
    {
        let body = response.receipt
        let receiptBundle = body?.bundleId ?? body?.bid
        guard receiptBundle?.utf8.elementsEqual(bundleID.utf8) == true else {  // bytes, not canonical equivalence
            return .rejected(.bundleMismatch, detail: "the receipt is for bundle \(receiptBundle ?? "unknown")")
        }
        var entries = (body?.inApp ?? []) + (response.latestReceiptInfo ?? [])
        if let ios6 = body?.ios6Transaction { entries.append(ios6) }
        var transactions: [AppleTransaction] = []
        var positions: [String: Int] = [:]
        for entry in entries {
            let transaction: AppleTransaction
            do {
                guard let read = try AppleTransaction(entry) else { continue }
                transaction = read
            } catch {
                return .rejected(.invalidReceipt, detail: "verifyReceipt answered with \(error.reason)")
            }
            if let position = positions[transaction.transactionID] {
                transactions[position] = transactions[position].merging(transaction)
            } else {
                positions[transaction.transactionID] = transactions.count
                transactions.append(transaction)
            }
        }
        return .verified(
            VerifiedPurchase(
                source: .receipt, bundleID: receiptBundle, environment: AppleEnvironment(rawValue: environment),
                transactions: transactions))
    }

    private func verifySigned(_ jws: String, source: VerifiedPurchase.Source) -> AppleVerdict {
        Self.verdict(onSigned: jws, source: source, verifier: signedData)
    }

    /// The verdict on a signed transaction: its signature, chain, bundle and environment (``SignedDataVerifier``),
    /// then its fields. A failure of any is a rejection, never a crash: the payload is hostile until verified,
    /// and a verified payload can still hold numbers no date can be made of.
    static func verdict(onSigned jws: String, source: VerifiedPurchase.Source, verifier: SignedDataVerifier)
        -> AppleVerdict
    {
        do {
            let transaction = try verifier.verifyTransaction(jws)
            guard let id = transaction.transactionId, !id.isEmpty else {
                return .rejected(.invalidReceipt, detail: "the signed transaction has no transaction id")
            }
            return .verified(
                VerifiedPurchase(
                    source: source, bundleID: transaction.bundleId, environment: transaction.environment ?? .production,
                    transactions: [try AppleTransaction(transaction)]))
        } catch {
            switch error.code {
            case .bundleMismatch: return .rejected(.bundleMismatch, detail: error.reason)
            case .environmentNotAllowed: return .rejected(.sandboxNotAllowed, detail: error.reason)
            default: return .rejected(.invalidReceipt, detail: error.reason)
            }
        }
    }
}
