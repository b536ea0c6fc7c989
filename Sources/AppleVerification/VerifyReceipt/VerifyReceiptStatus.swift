/// What a verifyReceipt `status` means, from Apple's documentation of the field.
public enum VerifyReceiptStatus: Equatable, Sendable {
    /// 0: the receipt is valid.
    case valid
    /// 21007: a sandbox receipt sent to production; ask the sandbox.
    case sandboxReceipt
    /// 21008: a production receipt sent to the sandbox; ask production.
    case productionReceipt
    /// 21005, 21009, and 21100-21199 unless Apple marks them not retryable: ask again later.
    case retryable(Int)
    /// 21002: "the receipt data was malformed or the service experienced a temporary issue" (Apple: try
    /// again). A malformed receipt and Apple's bad minute look the same: the caller tells them apart.
    case malformedOrTemporary
    /// 21004: the shared secret is not the account's. Our configuration (a rotation half done, a typo),
    /// never the player's purchase: not a verdict on the receipt.
    case sharedSecretMismatch
    /// Everything else (21000, 21001, 21003, 21006, 21010, 211xx marked not retryable, unknown): Apple's final answer.
    case invalid(Int)

    /// `isRetryable` is the response's `is_retryable` or `is-retryable` (Apple has used both spellings).
    public init(status: Int, isRetryable: Bool?) {
        switch status {
        case 0: self = .valid
        case 21007: self = .sandboxReceipt
        case 21008: self = .productionReceipt
        case 21004: self = .sharedSecretMismatch
        case 21002: self = .malformedOrTemporary
        case 21005, 21009: self = .retryable(status)
        // Apple: "internal data access errors". `is-retryable` 0 says this receipt's error will not heal; without
        // the flag nothing is said of the receipt, and Apple's own trouble must not deny a genuine purchase.
        case 21100...21199: self = isRetryable == false ? .invalid(status) : .retryable(status)
        default: self = .invalid(status)
        }
    }

    /// For people: what the status says, without any receipt content.
    public static func describe(_ status: Int) -> String {
        switch status {
        case 0: "valid"
        case 21000: "the request to the App Store was not made using HTTP POST"
        case 21001: "status no longer sent by the App Store"
        case 21002: "the receipt data was malformed or the service experienced a temporary issue"
        case 21003: "the receipt could not be authenticated"
        case 21004: "the shared secret does not match the account's"
        case 21005: "the receipt server was temporarily unable to provide the receipt"
        case 21006: "the receipt is valid but the subscription has expired"
        case 21007: "a sandbox receipt was sent to the production environment"
        case 21008: "a production receipt was sent to the sandbox environment"
        case 21009: "internal data access error"
        case 21010: "the user account cannot be found or has been deleted"
        case 21100...21199: "internal data access error"
        default: "unknown status"
        }
    }
}
