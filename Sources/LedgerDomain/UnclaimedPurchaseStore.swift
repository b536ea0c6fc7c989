public import Foundation
public import Vocabulary

/// Purchases Apple reported (`ONE_TIME_CHARGE`, `SUBSCRIBED`) that no job claimed in time: credited by an event
/// of their own (``PurchaseRules/creditDue(now:limit:in:)``), published until the broker acknowledges it.
public protocol UnclaimedPurchaseStore: Sendable {
    /// Credits the purchases waiting since before `now` that no job claimed (and that were not refunded), at
    /// most `limit`; answers every credit not yet published, oldest first (those of earlier rounds too).
    func creditUnclaimed(now: Date, limit: Int) async throws -> [StoredEvent]

    /// Marks credits published (their events acknowledged by the broker).
    func markCreditsPublished(eventIDs: [String]) async throws

    /// How many reported purchases wait for a job or their time (for a gauge).
    func waitingUnclaimed() async throws -> Int
}

/// A purchase Apple reported, waiting for a job to claim it until `dueAt`; then credited by `event` (made when
/// the notification was handled, so every replica publishes the same bytes).
public struct ReportedPurchase: Sendable, Equatable {
    public var purchaseID: PurchaseID
    public var transactionID: String
    public var originalTransactionID: String?
    public var productID: String
    public var quantity: Int
    public var dueAt: Date
    /// The credit's event (`receipt.unclaimed`), keyed by ``creditOrderID``.
    public var event: StoredEvent
    /// What the credit counts as revenue (its event's `revenue`).
    public var revenue: Int64?

    public init(
        purchaseID: PurchaseID, transactionID: String, originalTransactionID: String?, productID: String, quantity: Int,
        dueAt: Date, event: StoredEvent, revenue: Int64? = nil
    ) {
        self.revenue = revenue
        self.purchaseID = purchaseID
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.quantity = quantity
        self.dueAt = dueAt
        self.event = event
    }

    /// The order a credit holds until a job ties it to its own: `unclaimed:` + the transaction id.
    public static func creditOrderID(transactionID: String) -> String {
        UnclaimedOrderID.of(transactionID: transactionID)
    }
}
