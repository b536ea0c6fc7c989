public import Foundation
import Vocabulary

/// Where decisions are kept, so that no purchase is granted to two orders and a re-delivered job gets its
/// first answer again; what App Store notifications did to purchases; open consumption requests. Three narrow
/// views of it are what the worker's handlers are given: ``DecisionStore`` (jobs), ``PurchaseStateStore``
/// (notifications) and ``ConsumptionRequestStore`` (consumption answers).
///
/// Every key is scoped by app (``AppScope``): two games that both number their jobs and orders from 1 never
/// meet here. Purchases and their states are also scoped by environment: a Sandbox transaction is another
/// purchase than a Production one with the same id.
public protocol Ledger:
    DecisionStore, PurchaseStateStore, ConsumptionRequestStore, UnclaimedPurchaseStore, OffsetStore, SupportStore,
    DeskStore, LeaseStore, SubscriptionCheckStore, ErasureStore
{
    /// The connection pool's state, for `/metrics` (nil: a ledger without a pool, SQLite's).
    var poolStats: LedgerPoolStats? { get }

    /// Deletes the results (stored for re-delivered jobs) decided before `cutoff`; returns how many. Grants are
    /// never deleted: they are what stops a purchase from being granted twice. A job delivered again after
    /// its result went is verified again, and its grant, if any, meets itself in the ledger: the same event.
    func pruneResults(decidedBefore cutoff: Date) async throws -> Int

    /// Deletes, in batches of 10,000, what outlived its retention (``Retention``): handled notifications, and
    /// what is settled. Returns how many rows, by kind. Grants, results (``pruneResults(decidedBefore:)``),
    /// revoked purchase states and waiting purchases are never deleted here.
    func prune(_ retention: Retention) async throws -> [Retention.Kind: Int]

    /// Whether the ledger answers, and takes writes (for `/readyz`).
    func ping() async throws

    func close() async
}

/// What the ledger's upkeep deletes after its time, besides stored results: each kind with its cutoff (nil:
/// kept). The rows each kind names are ``Retention/Kind``'s; the SQL of each ledger says the same.
public struct Retention: Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        /// Handled notifications (`ledger.notifications_retention_days`).
        case notifications
        /// Consumption requests whose deadline passed before the cutoff.
        case consumptionRequests = "consumption_requests"
        /// Reported purchases settled before the cutoff: claimed by a job, refunded, or credited and published.
        case unclaimedPurchases = "unclaimed_purchases"
        /// Purchase states last changed before the cutoff that are not revoked (reinstated): a refund is kept.
        case purchaseStates = "purchase_states"
    }

    public var notificationsBefore: Date?
    public var settledBefore: Date?

    public init(notificationsBefore: Date?, settledBefore: Date?) {
        self.notificationsBefore = notificationsBefore
        self.settledBefore = settledBefore
    }

    package func cutoff(_ kind: Kind) -> Date? { kind == .notifications ? notificationsBefore : settledBefore }
}

/// A connection pool's state: connections allowed (`ledger.pool_size`), open, in use, callers waiting for one,
/// and how many acquisitions had to wait since start.
public struct LedgerPoolStats: Sendable, Equatable {
    public var size: Int
    public var open: Int
    public var inUse: Int
    public var waiting: Int
    public var waits: Int
    /// Statements sent to PostgreSQL since the pool opened, each a round trip.
    public var roundTrips: Int

    package init(size: Int, open: Int, inUse: Int, waiting: Int, waits: Int, roundTrips: Int) {
        self.size = size
        self.open = open
        self.inUse = inUse
        self.waiting = waiting
        self.waits = waits
        self.roundTrips = roundTrips
    }
}

extension Ledger {
    public var poolStats: LedgerPoolStats? { nil }
}
