import Foundation
public import Vocabulary

/// Apple's verdict on a proof, before the order checks.
public enum AppleVerdict: Sendable {
    case verified(VerifiedPurchase)
    case rejected(AppleRejection, detail: String)
}

/// The first failing check of the contract that belongs to Apple's answer. Raw values are deny reasons.
public enum AppleRejection: String, Sendable, CaseIterable {
    case invalidReceipt = "invalid_receipt"
    case bundleMismatch = "bundle_mismatch"
    case sandboxNotAllowed = "sandbox_not_allowed"
    case transactionNotFound = "transaction_not_found"

    /// The deny reason it is.
    public var denyReason: DenyReason {
        switch self {
        case .invalidReceipt: .invalidReceipt
        case .bundleMismatch: .bundleMismatch
        case .sandboxNotAllowed: .sandboxNotAllowed
        case .transactionNotFound: .transactionNotFound
        }
    }
}

/// How `receipt` proofs are verified (`apple.receipt_verification`).
public enum ReceiptVerification: Sendable {
    /// Apple's verifyReceipt endpoint: deprecated by Apple, working, no new features.
    case verifyReceipt
    /// The receipt's signature checked locally, its entry fetched with Get Transaction Info (docs/contract.md
    /// section 10). iOS 6 transaction receipts still go to verifyReceipt.
    case serverAPI(ReceiptSignatureVerifier)
}
