import Foundation

/// What a job asks the ledger to record.
public enum LedgerClaim: Sendable, Equatable {
    /// Grant the purchase `purchaseID` (by `transactionID`) to `orderID`: succeeds only if the purchase was
    /// granted to no other order, whatever transaction id it was presented with (a StoreKit 1 restore gives
    /// an old purchase a new transaction id on each device), and the order was granted with no other
    /// transaction. `purchaseID` nil means the transaction itself is the purchase (a consumable).
    case grant(orderID: String, transactionID: String, purchaseID: String? = nil)
    /// Record a deny (or any decision that claims nothing).
    case deny
}

/// The ledger's answer.
public enum LedgerOutcome: Sendable, Equatable {
    /// The decision and its event are stored.
    case recorded
    /// This job was decided before: here is its stored event, to publish again unchanged.
    case replay(Data)
    /// The transaction is already granted to another order.
    case duplicateTransaction
    /// The order is already granted with another transaction.
    case orderAlreadyFulfilled
    /// The purchase was granted, then refunded or revoked (an App Store notification said so).
    case revoked
}

/// A granted purchase, as the ledger holds it.
public struct GrantRecord: Sendable, Equatable {
    public let orderID: String
    public let transactionID: String
    /// The grant's event as published, when the ledger kept it (grants recorded since schema version 5).
    public let event: Data?
    public let revoked: Bool
    /// When a consumption request of this purchase must be answered by, if one is open.
    public let consumptionRespondBy: Date?

    public init(orderID: String, transactionID: String, event: Data?, revoked: Bool, consumptionRespondBy: Date?) {
        self.orderID = orderID
        self.transactionID = transactionID
        self.event = event
        self.revoked = revoked
        self.consumptionRespondBy = consumptionRespondBy
    }
}

/// What an App Store notification changes in the ledger. `at` is Apple's time of the change (the
/// notification's `signedDate`): a change older than the purchase's last one is stale and applies nothing,
/// so a REFUND delivered after the REFUND_REVERSED that undid it (Apple's retries, a backfill) cannot revoke.
public enum PurchaseChange: Sendable, Equatable {
    /// Nothing (an event only, or no event).
    case none
    /// Refunded or revoked: a later job presenting the purchase is denied `revoked`, even one that comes
    /// before any grant (the refund is remembered for a purchase this worker has not granted yet).
    case revoke(purchaseID: String, transactionID: String, at: Date)
    /// The refund was reversed: granted again.
    case reinstate(purchaseID: String, transactionID: String, at: Date)
    /// The player asked Apple for a refund; the answer is due by `respondBy`.
    case consumptionRequest(transactionID: String, respondBy: Date)
}

/// Where decisions are kept, so that no transaction is granted to two orders and a re-delivered job gets
/// its first answer again. Claiming a transaction and recording the decision are one atomic step.
public protocol Ledger: Sendable {
    /// Records the decision of job `jobID` with its event, atomically with the claim. A job already
    /// recorded gets `.replay` with its stored event, whatever the claim now says.
    func record(jobID: String, claim: LedgerClaim, event: Data) async throws -> LedgerOutcome

    /// The event stored for job `jobID`, if it was decided before: a re-delivered job is answered with it
    /// without asking Apple again.
    func storedEvent(jobID: String) async throws -> Data?

    /// The grant of a purchase (by its identity, or by one of its transaction ids), if it was granted.
    func grant(purchaseID: String?, transactionID: String) async throws -> GrantRecord?

    /// The event stored for notification `id` (nil inside: handled, no event), or nil if never handled.
    func storedNotification(id: String) async throws -> Data??

    /// Applies a notification's change and stores the event it produced, once per notification, atomically:
    /// `.recorded`, or `.replay` with the first handling's event when it was handled before. For a revocation
    /// or reinstatement `event` (made for `grantedOrder`, the grant found before) is kept only if the
    /// purchase's state changed; when a grant appeared, or changed hands, since it was looked up, throws
    /// ``GrantChanged``: look it up again.
    func recordNotification(id: String, change: PurchaseChange, event: Data?, grantedOrder: String?) async throws
        -> NotificationRecord

    /// Marks the consumption request of `transactionID` answered (sent, or refused for good).
    func answerConsumptionRequest(transactionID: String) async throws

    /// When the oldest consumption request not yet answered and not yet past its deadline was made.
    func oldestOpenConsumptionRequest() async throws -> Date?

    /// Deletes the results (stored for re-delivered jobs) decided before `cutoff`; returns how many. Grants are
    /// never deleted: they are what stops a purchase from being granted twice. A job delivered again after
    /// its result went is verified again, and its grant, if any, meets itself in the ledger: the same event.
    func pruneResults(decidedBefore cutoff: Date) async throws -> Int

    /// Whether the ledger answers (for `/readyz`).
    func ping() async throws

    func close() async
}

/// The rule both ledgers apply to a revoke or reinstate, given the purchase's last change (revoked or not,
/// and Apple's time of it): a change older than the last is stale and applies nothing; a change that applies
/// publishes its event only when it changes the state (a second refund of a refunded purchase does not).
enum PurchaseStateRule {
    static func outcome(revoke: Bool, at: Date, last: (revoked: Bool, at: Date)?) -> (applies: Bool, changes: Bool) {
        if let last, last.at >= at { return (false, false) }
        let wasRevoked = last?.revoked ?? false
        return (true, revoke ? !wasRevoked : wasRevoked)
    }
}

/// A grant appeared, or changed hands, between a notification's lookup and its record: look it up again.
public struct GrantChanged: Error, CustomStringConvertible {
    public var description: String { "a grant of the purchase changed while the notification was handled; retrying" }
}

/// How a notification was recorded.
public enum NotificationRecord: Sendable, Equatable {
    /// Recorded now; the event to publish (nil: none, as when a revocation changed nothing).
    case recorded(Data?)
    /// Handled before: its stored event (nil: it produced none), to publish again unchanged.
    case replay(Data?)
}

/// A ledger failure: the decision was not stored. Retried, unless `isPermanent`: the database refuses the
/// values themselves (too long for an index, invalid text), which no retry will change.
public struct LedgerError: Error, Sendable, CustomStringConvertible {
    public let reason: String
    public let isPermanent: Bool
    public init(_ reason: String, isPermanent: Bool = false) {
        self.reason = reason
        self.isPermanent = isPermanent
    }
    public var description: String { "ledger: \(reason)" }
}

/// Opens the ledger a `ledger.url` names: `sqlite:PATH` or `postgresql://...`.
public enum LedgerFactory {
    /// `schema`: the PostgreSQL schema of the ledger's tables (`ledger.schema`); SQLite has none.
    public static func open(url: String, poolSize: Int = 8, schema: String = PostgresSchema.defaultName) async throws
        -> any Ledger
    {
        if url.hasPrefix("sqlite:") {
            return try SQLiteLedger(path: String(url.dropFirst("sqlite:".count)))
        }
        if url.hasPrefix("postgresql://") || url.hasPrefix("postgres://") {
            guard let schema = PostgresSchema(name: schema) else {
                throw LedgerError("ledger.schema must be a lower-case SQL name (a-z, 0-9, _)")
            }
            return try await PostgresLedger(url: url, poolSize: poolSize, schema: schema)
        }
        throw LedgerError("ledger.url must start with sqlite: or postgresql://")
    }
}
