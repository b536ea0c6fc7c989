/// Why a job was denied: the `reason` of a `receipt.denied` event (docs/contract.md, section 3). Every value is
/// here and nowhere else; the contract's check table, the schema's enum and the metrics' series follow this type
/// (ContractDocumentTests). A new reason is a new case, and a minor release of the contract.
public enum DenyReason: String, CaseIterable, Sendable, Codable {
    // The checks on Apple's answer, in the contract's order.
    case invalidReceipt = "invalid_receipt"
    case bundleMismatch = "bundle_mismatch"
    case sandboxNotAllowed = "sandbox_not_allowed"
    case transactionNotFound = "transaction_not_found"
    // The checks of the order against the purchase.
    case productMismatch = "product_mismatch"
    case quantityMismatch = "quantity_mismatch"
    case accountMismatch = "account_mismatch"
    case revoked
    case expired
    // The ledger's checks.
    case duplicateTransaction = "duplicate_transaction"
    case orderAlreadyFulfilled = "order_already_fulfilled"
    /// The job itself is unusable (also dead-lettered).
    case malformedJob = "malformed_job"
}
