import Foundation

/// iOS 6 transaction receipts: base64 of an old-style (NeXT) property list whose `purchase-info` is itself
/// base64 of a property list holding `transaction-id`. Reading the id locally lets a job name the
/// transaction before Apple is asked, as Apple's `ReceiptUtility` does.
public enum LegacyTransactionReceipt {
    /// The `transaction-id` of an iOS 6 transaction receipt, or nil when it is not one.
    public static func transactionID(fromBase64 receipt: String) -> String? {
        guard let outer = Data(base64Encoded: receipt.trimmingCharacters(in: .whitespacesAndNewlines)),
            let purchaseInfo = value(of: "purchase-info", in: String(decoding: outer, as: UTF8.self)),
            let inner = Data(base64Encoded: purchaseInfo)
        else { return nil }
        return value(of: "transaction-id", in: String(decoding: inner, as: UTF8.self))
    }

    /// The quoted value of `"key" = "value";` in NeXT plist text.
    private static func value(of key: String, in text: String) -> String? {
        guard let keyRange = text.range(of: "\"\(key)\"") else { return nil }
        let rest = text[keyRange.upperBound...]
        guard let equals = rest.firstIndex(of: "="), let open = rest[equals...].firstIndex(of: "\"") else { return nil }
        let valueStart = rest.index(after: open)
        guard let close = rest[valueStart...].firstIndex(of: "\"") else { return nil }
        return String(rest[valueStart..<close])
    }
}
