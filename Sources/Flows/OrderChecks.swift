public import AppleVerification
public import Foundation
public import Vocabulary

/// The contract's checks (docs/contract.md §3), in its order, on Apple's verdict. The first failing check names
/// the deny reason. The ledger's two checks (duplicate_transaction, order_already_fulfilled) come after.
public enum OrderChecks {
    public enum Verdict: Sendable, Equatable {
        /// Ready to be claimed in the ledger.
        case grant(AppleTransaction, environment: AppleEnvironment)
        case deny(reason: DenyReason, detail: String, transaction: AppleTransaction?, environment: AppleEnvironment?)

        /// For a log line: the decision, its reason and the transaction's id; never the transaction itself,
        /// which holds the app account token that authorises a bare transaction id.
        var logFields: [String: String] {
            switch self {
            case .grant(let transaction, let environment):
                ["decision": "grant", "transaction_id": transaction.transactionID, "environment": environment.rawValue]
            case .deny(let reason, _, let transaction, _):
                ["decision": "deny", "reason": reason.rawValue, "transaction_id": transaction?.transactionID ?? ""]
            }
        }
    }

    public static func evaluate(_ job: ReceiptJob, verdict: AppleVerdict, now: Date = Date()) -> Verdict {
        let purchase: VerifiedPurchase
        switch verdict {
        case .rejected(let rejection, let detail):
            // A sandbox receipt refused by policy is known to be Sandbox: say so to the grant service.
            return .deny(
                reason: rejection.denyReason, detail: detail, transaction: nil,
                environment: rejection == .sandboxNotAllowed ? .sandbox : nil)
        case .verified(let verified):
            purchase = verified
        }
        let environment = purchase.environment
        // A signed transaction is one purchase: check it, so another product's is product_mismatch. An app
        // receipt holds many: without a transaction id the entry is chosen by the order's product, and a
        // receipt without one is transaction_not_found.
        let selected: AppleTransaction?
        if case .signedTransaction = job.proof, purchase.transactions.count == 1 {
            selected = purchase.transactions.first
        } else {
            selected = purchase.select(transactionID: job.transactionID, productID: job.productID)
        }
        guard let transaction = selected else {
            let detail =
                job.transactionID.map { "no transaction \($0) in the proof" }
                ?? "no transaction for product \(job.productID) in the proof"
            return .deny(reason: .transactionNotFound, detail: detail, transaction: nil, environment: environment)
        }
        func deny(_ reason: DenyReason, _ detail: String) -> Verdict {
            .deny(reason: reason, detail: detail, transaction: transaction, environment: environment)
        }
        // Compared as bytes, as the database compares them: Swift's == calls "é" and "e\u{301}" equal.
        if !sameBytes(transaction.productID, job.productID) {
            return deny(.productMismatch, "the transaction is for product \(transaction.productID ?? "unknown")")
        }
        if transaction.quantity != job.quantity {
            return deny(.quantityMismatch, "the transaction is for quantity \(transaction.quantity)")
        }
        if let expected = job.appAccountToken, !sameBytes(transaction.appAccountToken?.lowercased(), expected) {
            return deny(.accountMismatch, "the purchase's appAccountToken differs from the order's")
        }
        // Refunded in part (a prorated refund), the rest is the player's: granted, and the refund taken back by
        // its notification's receipt.revoked (or at once, when the ledger heard of it before the grant).
        if let revoked = transaction.revocationDate, !transaction.isPartlyRefunded {
            return deny(.revoked, "refunded or revoked at \(revoked)")
        }
        // Apple: the service is the upgrade's transaction's; what was left of this period is refunded.
        if transaction.isUpgraded {
            return deny(.revoked, "upgraded to another subscription: the upgrade's transaction is the player's")
        }
        if transaction.isSubscription, let expires = transaction.expiresDate, expires <= now {
            return deny(.expired, "the subscription expired at \(expires)")
        }
        return .grant(transaction, environment: environment)
    }

    package static func sameBytes(_ left: String?, _ right: String) -> Bool {
        guard let left else { return false }
        return left.utf8.elementsEqual(right.utf8)
    }
}
