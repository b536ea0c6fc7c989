import Foundation
import Vocabulary

/// Verifies any proof through the right Apple path and normalises the answer. Transient failures throw a
/// retriable ``AppleVerificationError`` and are never a rejection.
public final class AppleVerifier: Sendable {
    public let bundleID: String
    private let receipts: VerifyReceiptClient
    /// The App Store Server API, when a key is configured (consumption answers and history use it too).
    public let api: AppStoreServerAPIClient?
    /// Verifies signed transactions, renewal info and notifications.
    public let signedData: SignedDataVerifier
    private let receiptVerification: ReceiptVerification

    public init(
        bundleID: String, receipts: VerifyReceiptClient, api: AppStoreServerAPIClient?,
        signedData: SignedDataVerifier, receiptVerification: ReceiptVerification = .verifyReceipt
    ) {
        self.bundleID = bundleID
        self.receipts = receipts
        self.api = api
        self.signedData = signedData
        self.receiptVerification = receiptVerification
    }

    /// `attempts` counts calls made to Apple, retries of the caller included when it passes the same counter.
    /// `selecting` says which entry of an app receipt the order is about (used when receipts are verified
    /// with the App Store Server API, which fetches that one entry).
    public func verify(_ proof: PurchaseProof, selecting: ReceiptSelection? = nil, attempts: inout Int) async throws
        -> AppleVerdict
    {
        switch proof {
        case .receipt(let receipt):
            if case .serverAPI(let signatures) = receiptVerification, let api {
                switch signatures.verify(base64: receipt) {
                case .legacy: break  // an iOS 6 receipt: verifyReceipt below
                case .invalid(let reason): return .rejected(.invalidReceipt, detail: reason)
                case .verified(let appReceipt):
                    return try await verifyLocally(appReceipt, selecting: selecting, api: api, attempts: &attempts)
                }
            }
            return try await verifyReceipt(receipt, attempts: &attempts)
        case .signedTransaction(let jws):
            do {
                return try await verifySigned(jws, source: .signedTransaction)
            } catch let error as AppleVerificationError where error.code == .environmentMissing {
                return try await placing(jws, attempts: &attempts)
            }
        case .transactionID(let id):
            guard let api else { throw Self.noAPIKey("looking a transaction id up") }
            return try await lookUp(transactionID: id, api: api, attempts: &attempts)
        }
    }

    private static func noAPIKey(_ what: String) -> AppleVerificationError {
        AppleVerificationError(
            .invalidKey, "\(what) needs an App Store Server API key (apple.api.*), and none is configured")
    }

    /// A signed transaction that names no environment (signed before Apple added the field): Production cannot be
    /// told from Sandbox by it, and neither is assumed. Verified but for that (its chain's revocation too), its id is
    /// asked of the App Store Server API, whose answer names its environment and is the transaction checked; without
    /// a key it is a dead letter, as an id alone is. A revoked chain or no id is `invalid_receipt`, as for any.
    private func placing(_ jws: String, attempts: inout Int) async throws -> AppleVerdict {
        let id: String?
        do {
            id = try await signedData.settling { () throws(AppleVerificationError) in
                try signedData.unplacedTransactionID(jws)
            }
        } catch {
            if error.isRetriable { throw error }
            return .rejected(.invalidReceipt, detail: error.reason)
        }
        guard let id, !id.isEmpty else {
            return .rejected(.invalidReceipt, detail: "the signed transaction has no transaction id")
        }
        guard let api else {
            throw Self.noAPIKey(
                "the signed transaction names no environment (signed before Apple added it): looking it up")
        }
        return try await lookUp(transactionID: id, api: api, attempts: &attempts)
    }

    /// A transaction as Apple has it now (Get Transaction Info), verified like a signed transaction.
    private func lookUp(transactionID id: String, api: AppStoreServerAPIClient, attempts: inout Int) async throws
        -> AppleVerdict
    {
        switch try await api.transactionInfo(id: id, attempts: &attempts) {
        case .found(let jws): return try await verifySigned(jws, source: .serverAPI)
        case .notFound: return .rejected(.transactionNotFound, detail: "Apple knows no transaction \(id)")
        case .rejected(let code):
            return .rejected(.transactionNotFound, detail: "Apple refused the transaction id (error \(code))")
        }
    }

    /// An app receipt whose signature verified: its bundle id and environment, then the order's entry fetched
    /// from Apple and checked like any signed transaction. The environment is the one Apple signed into the
    /// receipt (its type): a Sandbox receipt where Sandbox is not allowed is denied at once, with no call
    /// (anyone with a TestFlight build makes them for free); otherwise only that environment is asked. A
    /// receipt that names none is asked of Production, then of Sandbox only where it is allowed.
    private func verifyLocally(
        _ receipt: AppReceipt, selecting: ReceiptSelection?, api: AppStoreServerAPIClient, attempts: inout Int
    ) async throws -> AppleVerdict {
        guard receipt.bundleID?.utf8.elementsEqual(bundleID.utf8) == true else {
            return .rejected(.bundleMismatch, detail: "the receipt is for bundle \(receipt.bundleID ?? "unknown")")
        }
        let environment = receipt.environment
        if let environment, environment != .production, !api.configuration.allowSandbox {
            return .rejected(
                .sandboxNotAllowed, detail: "a \(environment) receipt, and sandbox purchases are not allowed")
        }
        guard let id = Self.entry(of: receipt, selecting)?.transactionID else {
            // No entry for the order: the checks answer transaction_not_found, as for verifyReceipt's answer.
            return .verified(
                VerifiedPurchase(
                    source: .receipt, bundleID: receipt.bundleID, environment: environment ?? .production,
                    transactions: []))
        }
        switch try await api.transactionInfo(id: id, in: environment, attempts: &attempts) {
        case .found(let jws): return try await verifySigned(jws, source: .serverAPI)
        case .notFound:
            return .rejected(.transactionNotFound, detail: "Apple knows no transaction \(id) of the receipt")
        case .rejected(let code):
            return .rejected(.transactionNotFound, detail: "Apple refused the receipt's transaction id (error \(code))")
        }
    }

    /// The receipt's entry for the order: the one with the job's transaction id, else the newest of its product.
    static func entry(of receipt: AppReceipt, _ selection: ReceiptSelection?) -> AppReceipt.InApp? {
        if let id = selection?.transactionID {
            return receipt.inApp.first { $0.transactionID?.utf8.elementsEqual(id.utf8) == true }
        }
        let candidates = receipt.inApp.filter { entry in
            selection.map { entry.productID?.utf8.elementsEqual($0.productID.utf8) == true } ?? true
        }
        func purchased(_ entry: AppReceipt.InApp) -> Int {
            entry.purchaseDate.flatMap(ReceiptSignatureVerifier.seconds).map { Int($0) } ?? Int.min
        }
        return candidates.max { purchased($0) < purchased($1) }
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

    /// A chain seen first (its revocation status being asked) is waited for once, here: the job is answered now,
    /// without a retry that would call Apple again for the same transaction.
    private func verifySigned(_ jws: String, source: VerifiedPurchase.Source) async throws -> AppleVerdict {
        try await signedData.settling { () throws(AppleVerificationError) in
            try Self.verdict(onSigned: jws, source: source, verifier: signedData)
        }
    }

    /// The verdict on a signed transaction: its signature, chain, bundle and environment (``SignedDataVerifier``),
    /// then its fields. A failure of any is a rejection, never a crash: the payload is hostile until verified,
    /// and a verified payload can still hold numbers no date can be made of. Only what may pass later is thrown
    /// (the chain's revocation status not known yet): the job is retried, never denied for it.
    static func verdict(onSigned jws: String, source: VerifiedPurchase.Source, verifier: SignedDataVerifier)
        throws(AppleVerificationError) -> AppleVerdict
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
            if error.isRetriable { throw error }
            switch error.code {
            case .bundleMismatch: return .rejected(.bundleMismatch, detail: error.reason)
            case .environmentNotAllowed: return .rejected(.sandboxNotAllowed, detail: error.reason)
            // Neither Sandbox nor invalid: a job's own is looked up (``placing(_:attempts:)``); Apple's answer without
            // one says nothing of the purchase either, and is a dead letter.
            case .environmentMissing: throw error
            default: return .rejected(.invalidReceipt, detail: error.reason)
            }
        }
    }
}
