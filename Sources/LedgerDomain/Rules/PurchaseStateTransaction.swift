package import Foundation
package import Vocabulary

/// How a reported purchase waiting for a job ended.
package enum UnclaimedEnding: String {
    /// A job claimed it (or another replica credited it meanwhile).
    case claimed
    /// Refunded or revoked before its time: nothing to credit.
    case refunded
    /// Credited by its own event.
    case credited
}

/// A notification handled before: what it published (nil: nothing).
package struct HandledNotification {
    package var event: StoredEvent?

    package init(event: StoredEvent? = nil) {
        self.event = event
    }
}

/// The statements ``PurchaseRules`` reads and writes through where a rule reads what it writes (a subscription's
/// change, a credit due, a job meeting a credit), run inside one transaction.
package protocol PurchaseStateTransaction {
    /// Serialises this purchase's claim and state changes across writers (a no-op where the transaction
    /// already holds the only write lock).
    func lock(_ purchase: PurchaseKey) throws
    /// The grant of the purchase in its app and environment: by its identity, or one of its transaction ids;
    /// the grant of `transactionID` itself first.
    func grant(of purchase: PurchaseKey, transactionID: String) throws -> GrantRecord?
    func state(of purchase: PurchaseKey) throws -> PurchaseState?

    // Subscriptions
    /// The grant that holds a subscription: a grant of its original transaction, or of a period of it.
    func subscriptionGrant(app: AppScope, environment: AppleEnvironment, originalTransactionID: String) throws
        -> GrantRecord?
    func subscriptionState(app: AppScope, environment: AppleEnvironment, originalTransactionID: String) throws
        -> SubscriptionState?
    func setSubscriptionState(
        app: AppScope, environment: AppleEnvironment, originalTransactionID: String, _ state: SubscriptionState) throws
    /// Grants a purchase without a job; false when it is held already (by a job, or another credit).
    func insertCredit(_ credit: Credit) throws -> Bool

    // Reported purchases
    /// Reported purchases still waiting whose time has come, oldest first, locked for this transaction (another
    /// replica's sweep skips them).
    func dueUnclaimed(now: Date, limit: Int) throws -> [(AppScope, AppleEnvironment, ReportedPurchase)]
    func settleUnclaimed(_ purchase: PurchaseKey, _ outcome: UnclaimedEnding) throws
    func unpublishedCredits(limit: Int) throws -> [StoredEvent]

    // A job meeting a credit
    func storedDecision(_ key: DecisionKey) throws -> StoredEvent?
    /// The unclaimed credit that holds this purchase, if one does and no job tied it yet.
    func untiedCredit(of purchase: PurchaseKey, transactionID: String) throws -> UntiedCredit?
    func orderGranted(app: AppScope, orderID: String) throws -> Bool
    /// The credit when the purchase is held by a credit (tied, or a renewal) of `orderID`; nil otherwise.
    func creditHeld(of purchase: PurchaseKey, byOrder orderID: String) throws -> HeldCredit?
    /// Gives the credit's grant to the job's order and player.
    func tieCredit(of purchase: PurchaseKey, transactionID: String, to claim: GrantClaim) throws
    func insertResult(_ key: DecisionKey, event: StoredEvent) throws
}
