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

    /// Deletes the results (stored for re-delivered jobs) decided before `cutoff`; returns how many. Grants are
    /// never deleted: they are what stops a purchase from being granted twice. A job delivered again after
    /// its result went is verified again, and its grant, if any, meets itself in the ledger: the same event.
    func pruneResults(decidedBefore cutoff: Date) async throws -> Int

    /// Whether the ledger answers (for `/readyz`).
    func ping() async throws

    func close() async
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
