/// Which purchase a claim is about (docs/contract.md, section 3): the ledger's key for it, which no two purchases
/// of an app and environment share. This type is the only place that knows the keys' shapes.
///
/// | purchase | key |
/// |---|---|
/// | a transaction (a consumable; a non-consumable by its original transaction) | the transaction id, bare |
/// | a subscription's billing period | `w:` + its web order line item id |
/// | a subscription as a whole (its state) | `s:` + its original transaction id |
///
/// Transaction ids are bare because ledgers written before purchase identities keyed each grant by its
/// transaction id, and a new claim of the same purchase must meet that grant. Web order line items are another
/// number sequence, whose numbers may equal a transaction id: their prefix keeps them apart.
public struct PurchaseID: Hashable, Sendable, CustomStringConvertible {
    /// The key as the ledger stores it.
    public let key: String

    /// A key read back from the ledger.
    public init(key: String) { self.key = key }

    public static func transaction(_ transactionID: String) -> PurchaseID { PurchaseID(key: transactionID) }
    public static func billingPeriod(webOrderLineItemID: String) -> PurchaseID {
        PurchaseID(key: "w:" + webOrderLineItemID)
    }
    public static func subscription(originalTransactionID: String) -> PurchaseID {
        PurchaseID(key: "s:" + originalTransactionID)
    }

    /// A subscription's billing period (its grant records the subscription's original transaction).
    public var isBillingPeriod: Bool { key.hasPrefix("w:") }

    public var description: String { key }
}
