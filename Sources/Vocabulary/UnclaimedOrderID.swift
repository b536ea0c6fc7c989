/// The order a purchase credited unclaimed (`receipt.unclaimed`) holds until a job ties it to its own:
/// `unclaimed:` and the transaction id. Reserved: a job whose `order_id` uses the prefix is malformed (it would
/// share the order that a credit of that transaction gets, and a grant service would merge two purchases into one
/// order).
public enum UnclaimedOrderID {
    public static let prefix = "unclaimed:"

    public static func of(transactionID: String) -> String { prefix + transactionID }

    /// Byte for byte, as the ledgers compare orders (`Unclaimed:` is an ordinary order id).
    public static func isReserved(_ orderID: String) -> Bool { orderID.utf8.starts(with: prefix.utf8) }
}
