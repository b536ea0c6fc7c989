import Foundation
import Vocabulary

/// What the app sent as proof of purchase.
public enum PurchaseProof: Sendable, Equatable {
    /// An app receipt or an iOS 6 transaction receipt, base64, as sent to verifyReceipt.
    case receipt(String)
    /// StoreKit 2 `Transaction.jwsRepresentation`.
    case signedTransaction(String)
    /// A transaction id alone, looked up with the App Store Server API.
    case transactionID(String)

    /// Which proof it is, never its content (for logs and spans): `receipt`, `signed_transaction`, `transaction_id`.
    public var kind: String {
        switch self {
        case .receipt: "receipt"
        case .signedTransaction: "signed_transaction"
        case .transactionID: "transaction_id"
        }
    }
}

/// Which entry of an app receipt the order is about: the one with `transactionID` when the job names one,
/// else the newest of the order's product (docs/contract.md, section 3).
public struct ReceiptSelection: Sendable {
    public var transactionID: String?
    public var productID: String

    public init(transactionID: String?, productID: String) {
        self.transactionID = transactionID
        self.productID = productID
    }
}
