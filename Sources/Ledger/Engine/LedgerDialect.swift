import Foundation

/// What the ledger engine (``LedgerEngine``) needs of a database: how a transaction runs, the health check, and
/// the claim's facts and writes, a batch of stored answers and a notification's facts, which the engine reads and
/// writes statement by statement unless a dialect has a faster way (PostgreSQL's functions, whose plans each
/// server connection keeps: ``ClaimStatements``). Every other statement is written once (``PurchaseStatements``,
/// ``LedgerQueries``) on the dialect's ``SQLSession``.
protocol LedgerDialect: Sendable {
    /// How many batches of records, and of lookups, run at once.
    var concurrentBatches: Int { get }
    /// How long a batch of records waits for others while batches are coming fast (``Batcher``): zero, none.
    var recordGathering: Duration { get }
    /// The connection pool's state, for `/metrics` (nil: no pool).
    var poolStats: LedgerPoolStats? { get }

    /// Runs `body` in one write transaction: committed when it returns, rolled back when it throws.
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T

    /// Runs `body`'s reads, which write nothing: on SQLite in one read transaction (one snapshot, its locks taken
    /// once); on PostgreSQL each statement on its own. A body relies on neither.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T

    /// What the ledger holds about a batch's jobs, purchases and orders, read under the locks of their purchases,
    /// inside `session`'s write transaction.
    func claimFacts(_ decisions: [Decision], in session: any SQLSession) throws -> ClaimFacts

    /// Writes what ``ClaimRules`` decided for a batch (`results`, index for index with `decisions`), in `session`'s
    /// transaction.
    func claimWrite(_ decisions: [Decision], _ results: [ClaimResult], in session: any SQLSession) throws

    /// What the ledger holds for a notification (``PurchaseRules/factsQuery(_:)``), inside `session`'s write
    /// transaction: read after the purchase's lock when the query takes it, so a grant committed meanwhile is seen.
    func purchaseFacts(_ query: PurchaseFactsQuery, in session: any SQLSession) throws -> PurchaseFacts

    /// The stored answers of many jobs, in one read.
    func storedDecisions(_ keys: [DecisionKey], in session: any SQLSession) throws -> [StoredEvent?]

    /// Whether the ledger answers and takes writes.
    func ping() async throws

    func close() async
}

/// Apple gives a consumption request 12 hours from the notification.
let consumptionWindow: TimeInterval = 12 * 3600

extension LedgerDialect {
    /// Statement by statement (SQLite, in process: no round trips to save).
    func purchaseFacts(_ query: PurchaseFactsQuery, in session: any SQLSession) throws -> PurchaseFacts {
        let statements = PurchaseStatements(session: session)
        var facts = PurchaseFacts(handled: try statements.storedNotification(id: query.notificationID))
        guard facts.handled == nil, let purchase = query.purchase else { return facts }
        if query.locks { try statements.lock(purchase) }
        facts.grant = try statements.grant(of: purchase, transactionID: query.transactionID)
        if query.readsState { facts.state = try statements.state(of: purchase) }
        return facts
    }
}
