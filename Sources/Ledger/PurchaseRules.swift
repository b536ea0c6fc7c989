import Foundation

/// What an App Store notification does to a purchase: the one place that decides it. Each ledger runs it
/// inside one transaction of its own, through the statements of ``PurchaseStateTransaction``; the two
/// ledgers differ only in that SQL.
///
/// - A notification is handled once (its `notificationUUID`): handled before, it answers its first outcome.
/// - A revoke or reinstate changes the purchase's state (in its app and environment) unless it is older than
///   the purchase's last change (Apple's `signedDate` orders them); it publishes an event only when it changes
///   the state of a purchase granted here (a second refund does not).
/// - A consumption request is kept, with its deadline, only for a purchase granted here: nobody else could
///   answer it, and the oldest-unanswered gauge must not alarm for another system's purchase.
/// - A notification of one environment never touches a grant of the other.
enum PurchaseRules {
    static func apply(
        _ change: NotificationChange, event make: (GrantRecord) -> StoredEvent?,
        in transaction: some PurchaseStateTransaction
    ) throws -> NotificationRecord {
        if let handled = try transaction.storedNotification(id: change.id) { return .replay(handled.event) }
        var published: StoredEvent?
        var granted = false
        switch change.kind {
        case .none:
            break
        case .revoke(let purchaseID, let transactionID, let at), .reinstate(let purchaseID, let transactionID, let at):
            let revoke = if case .revoke = change.kind { true } else { false }
            let purchase = PurchaseKey(app: change.app, environment: change.environment, purchaseID: purchaseID)
            // The claim of a grant takes the same lock: a grant and a revocation of one purchase never interleave.
            try transaction.lock(purchase)
            let grant = try transaction.grant(of: purchase, transactionID: transactionID)
            granted = grant != nil
            let outcome = outcome(revoke: revoke, at: at, last: try transaction.state(of: purchase))
            if outcome.applies {
                try transaction.setState(of: purchase, transactionID: transactionID, revoked: revoke, at: at)
                try transaction.setRevoked(revoke, purchase: purchase, transactionID: transactionID)
            }
            if outcome.changes, let grant { published = make(grant) }
        case .consumptionRequest(let transactionID, let respondBy):
            let purchase = PurchaseKey(app: change.app, environment: change.environment, purchaseID: transactionID)
            if let grant = try transaction.grant(of: purchase, transactionID: transactionID) {
                granted = true
                try transaction.openConsumptionRequest(
                    app: change.app, environment: change.environment, transactionID: transactionID,
                    notificationID: change.id, respondBy: respondBy)
                published = make(grant)
            }
        }
        try transaction.insertNotification(id: change.id, event: published)
        return .recorded(published, granted: granted)
    }

    /// The rule for a revoke or reinstate, given the purchase's last change (revoked or not, and Apple's time
    /// of it): a change older than the last is stale and applies nothing; a change that applies changes the
    /// state only when it differs from the last (a second refund of a refunded purchase does not).
    static func outcome(revoke: Bool, at: Date, last: (revoked: Bool, at: Date)?) -> (applies: Bool, changes: Bool) {
        if let last, last.at >= at { return (false, false) }
        let wasRevoked = last?.revoked ?? false
        return (true, revoke ? !wasRevoked : wasRevoked)
    }
}

/// A purchase in its app and environment.
struct PurchaseKey: Hashable, Sendable {
    var app: AppScope
    var environment: String
    var purchaseID: String
}

/// A notification handled before: what it published (nil: nothing).
struct HandledNotification {
    var event: StoredEvent?
}

/// The statements ``PurchaseRules`` needs, run by one ledger inside one transaction.
protocol PurchaseStateTransaction {
    func storedNotification(id: String) throws -> HandledNotification?
    /// Serialises this purchase's claim and state changes across writers (a no-op where the transaction
    /// already holds the only write lock).
    func lock(_ purchase: PurchaseKey) throws
    /// The grant of the purchase in its app and environment: by its identity, or one of its transaction ids;
    /// the grant of `transactionID` itself first.
    func grant(of purchase: PurchaseKey, transactionID: String) throws -> GrantRecord?
    func state(of purchase: PurchaseKey) throws -> (revoked: Bool, at: Date)?
    func setState(of purchase: PurchaseKey, transactionID: String, revoked: Bool, at: Date) throws
    /// Marks the purchase's grants revoked (keeping the first revocation's time) or not.
    func setRevoked(_ revoked: Bool, purchase: PurchaseKey, transactionID: String) throws
    /// Opens (or re-opens) a transaction's consumption request; a request delivered late (a backfill) never
    /// moves a newer one's deadline back.
    func openConsumptionRequest(
        app: AppScope, environment: String, transactionID: String, notificationID: String, respondBy: Date) throws
    func insertNotification(id: String, event: StoredEvent?) throws
}
