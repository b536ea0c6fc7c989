public import Foundation
public import Vocabulary

/// The ledger, written once over a database's ``LedgerDialect``: decisions recorded in batches (read the facts
/// under the purchases' locks, let ``ClaimRules`` decide, write what they say), notifications applied by
/// ``PurchaseRules``, and every read and upkeep of the ledger's tables. `LedgerFactory.open` makes one on SQLite
/// (``SQLiteDialect``, one host) or PostgreSQL (``PostgresDialect``, shared by every replica).
public final class LedgerEngine: Ledger, Sendable {
    let dialect: any LedgerDialect
    /// Lookups and records go in batches, one round trip and one transaction each (see ``Batcher``).
    private let lookups: Batcher<DecisionKey, StoredEvent?>
    private let records: Batcher<Decision, RecordAnswer>

    /// One decision's answer in a batch.
    enum RecordAnswer: Sendable {
        case outcome(ClaimVerdict)
        /// Met a concurrent decision, a deadlock or a unique violation: retried by the caller.
        case conflict
        /// Failed for good (a value the database refuses), or alone.
        case failed(LedgerError)
    }

    init(dialect: any LedgerDialect) {
        self.dialect = dialect
        // Under load the batches grow instead of multiplying (docs/benchmarks.md, "The ledger as it grows").
        lookups = Batcher(maxBatch: 256, maxConcurrent: dialect.concurrentBatches) { keys in
            try await dialect.read { try dialect.storedDecisions(keys, in: $0) }
        }
        records = Batcher(
            maxBatch: 256, maxConcurrent: dialect.concurrentBatches, gather: dialect.recordGathering
        ) { decisions in
            try await Self.record(decisions, dialect: dialect)
        }
    }

    public var poolStats: LedgerPoolStats? { dialect.poolStats }

    // MARK: Decisions

    public func storedDecision(_ key: DecisionKey) async throws -> StoredEvent? {
        try await lookups.submit(key)
    }

    /// One call for a job's claim: the batch's rules, then, for a purchase held by a credit of a purchase no job
    /// claimed, the credit tied to the order when the decision says how to answer it (``Decision/creditAnswer``).
    public func record(_ decision: Decision) async throws -> ClaimVerdict {
        switch try await records.submit(decision) {
        case .outcome(.duplicateTransaction):
            guard let answer = decision.creditAnswer else { return .duplicateTransaction }
            return try await claimCredit(decision, answer: answer).outcome
        case .outcome(let outcome): return outcome
        case .conflict:
            // Decided meanwhile by another replica (or another batch): the retry finds the stored answer.
            throw LedgerError(.conflict, "job \(decision.key.jobID) was decided concurrently; retrying")
        case .failed(let error): throw error
        }
    }

    /// Many decisions in one transaction, without a subtransaction each: the facts read under the locks of their
    /// purchases (the notification side takes the same: a grant and a revocation of one purchase never
    /// interleave), ``ClaimRules``' decisions, and their writes. A batch that meets a concurrent writer or a
    /// value refused is rolled back, and each decision is then recorded alone: only the one at fault fails.
    static func record(_ decisions: [Decision], dialect: any LedgerDialect) async throws -> [RecordAnswer] {
        do {
            return try await dialect.write { session in
                try claim(decisions, dialect: dialect, in: session).map { .outcome($0.outcome) }
            }
        } catch let error as LedgerError where error.code == .conflict || error.code == .valueRefused {
            guard decisions.count > 1 else { return [error.code == .conflict ? .conflict : .failed(error)] }
            var answers: [RecordAnswer] = []
            for decision in decisions { answers += try await record([decision], dialect: dialect) }
            return answers
        }
    }

    /// A batch's claim in `session`'s write transaction: the facts under the purchases' locks, ``ClaimRules``'
    /// decisions and their writes, a subscription's watch from its grant, a refund Apple stated remembered (and, of
    /// a grant held already, written as its notification writes it).
    static func claim(_ decisions: [Decision], dialect: any LedgerDialect, in session: any SQLSession) throws
        -> [ClaimResult]
    {
        var facts = try dialect.claimFacts(decisions, in: session)
        // The few that carry a refund Apple's proof states: whether it was reversed since (the facts hold refunds
        // in force only).
        for decision in decisions {
            guard let stated = decision.appleRefund, let claim = decision.grant, let purchase = decision.purchase
            else { continue }
            if try LedgerQueries.reversed(purchase, transactionID: claim.transactionID, since: stated.at, in: session) {
                facts.addReversal(purchase)
            }
        }
        let results = ClaimRules.decide(decisions, facts: &facts)
        try dialect.claimWrite(decisions, results, in: session)
        for (decision, result) in zip(decisions, results) {
            guard let claim = result.grant, let period = claim.subscriptionPeriod,
                let original = claim.originalTransactionID
            else { continue }
            try SubscriptionCheckQueries.watch(
                app: decision.key.app, environment: claim.environment, originalTransactionID: original,
                period: period, in: session)
        }
        // A refund only Apple's proof stated: remembered beside the grant it made, or, of a grant held already,
        // written as its notification writes it (the grant revoked too).
        for (decision, result) in zip(decisions, results) {
            guard let claim = decision.grant, let purchase = decision.purchase else { continue }
            if let seen = result.refundSeen, result.grant != nil {
                try LedgerQueries.rememberRefund(purchase, transactionID: claim.transactionID, seen, in: session)
            }
            if let refund = result.heldRefunded {
                try session.run(
                    PurchaseStatements(session: session).statements(
                        for: .state(
                            purchase, transactionID: claim.transactionID, revoked: true, at: refund.at,
                            share: refund.share)))
            }
        }
        return results
    }

    /// A transaction of its own: the tie reads what it writes, and takes the subscription's lock before the
    /// purchase's, as a renewal does. A job decided by another writer meanwhile fails its insert (a unique
    /// violation, retried): the retry finds its answer.
    func claimCredit(
        _ decision: Decision, answer: @escaping @Sendable (_ creditEventID: String, _ revenue: Int64?) -> StoredEvent
    ) async throws -> CreditClaim {
        try await dialect.write { session in
            let claimed = try PurchaseRules.claimCredit(
                decision, answer: answer, in: PurchaseStatements(session: session))
            // A subscription credited before its job is watched from its tie as from a grant: its period's news,
            // if it never comes, is asked of Apple (the credit alone knows no period to watch).
            if case .tied = claimed, let claim = decision.grant, let period = claim.subscriptionPeriod,
                let original = claim.originalTransactionID
            {
                try SubscriptionCheckQueries.watch(
                    app: decision.key.app, environment: claim.environment, originalTransactionID: original,
                    period: period, in: session)
            }
            return claimed
        }
    }

    // MARK: Notifications

    public func storedNotification(id: String) async throws -> NotificationRecord? {
        try await dialect.read {
            try PurchaseStatements(session: $0).storedNotification(id: id).map { .replay($0.event) }
        }
    }

    /// A notification in one transaction: its facts read under its purchase's lock (one statement on PostgreSQL),
    /// ``PurchaseRules``' decision, the event made here (the one place), and the writes with the notification
    /// kept (one statement). On PostgreSQL four round trips, with the transaction's begin and commit; a
    /// subscription's change, which reads what it writes, a few more.
    public func apply(_ change: NotificationChange, event make: @escaping @Sendable (PurchaseHolder) -> StoredEvent?)
        async throws -> NotificationRecord
    {
        let dialect = dialect
        return try await dialect.write { session in
            let statements = PurchaseStatements(session: session)
            var decided: NotificationDecision
            if case .subscription(let subscription) = change.kind {
                if let handled = try statements.storedNotification(id: change.id) { return .replay(handled.event) }
                decided = try PurchaseRules.applySubscription(subscription, change: change, in: statements)
            } else {
                if let subscription = PurchaseRules.subscriptionToLock(for: change) {
                    try statements.lock(subscription)
                }
                let facts = try dialect.purchaseFacts(PurchaseRules.factsQuery(change), in: session)
                if let handled = facts.handled { return .replay(handled.event) }
                decided = PurchaseRules.decide(change, facts: facts)
                try PurchaseRules.creditReversedPeriod(change, facts: facts, decided: &decided, in: statements)
            }
            // One statement on PostgreSQL, on one snapshot: each write must touch tables the others do not.
            assert(Set(decided.writes.map(\.table)).count == decided.writes.count, "two writes of one table")
            let published = decided.notice ?? decided.wanted.flatMap(make)
            try session.run(
                decided.writes.flatMap(statements.statements(for:))
                    + [statements.notification(id: change.id, event: published, source: change.source)])
            return .recorded(published, granted: decided.granted)
        }
    }

    // MARK: Purchases no job claimed

    public func creditUnclaimed(now: Date, limit: Int) async throws -> [StoredEvent] {
        try await dialect.write {
            try PurchaseRules.creditDue(now: now, limit: limit, in: PurchaseStatements(session: $0))
        }
    }

    public func markCreditsPublished(eventIDs: [String]) async throws {
        guard !eventIDs.isEmpty else { return }
        try await dialect.write { try LedgerQueries.markCreditsPublished(eventIDs: eventIDs, in: $0) }
    }

    public func waitingUnclaimed() async throws -> Int {
        try await dialect.read { try LedgerQueries.waitingUnclaimed(in: $0) }
    }

    // MARK: Consumption requests

    public func grant(transactionID: String, app: AppScope?) async throws -> GrantRecord? {
        try await dialect.read { try LedgerQueries.grant(transactionID: transactionID, app: app, in: $0) }
    }

    public func answerConsumptionRequest(app: AppScope, environment: AppleEnvironment, transactionID: String)
        async throws
    {
        try await dialect.write {
            try LedgerQueries.answerConsumptionRequest(
                app: app, environment: environment, transactionID: transactionID, in: $0)
        }
    }

    public func oldestOpenConsumptionRequests() async throws -> [AppScope: Date] {
        let now = Date()
        return try await dialect.read { try LedgerQueries.oldestOpenConsumptionRequests(now: now, in: $0) }
    }

    // MARK: Support

    public func supportRecord(
        app: AppScope, environment: AppleEnvironment, purchaseID: PurchaseID, transactionID: String
    ) async throws -> SupportRecord {
        try await dialect.read {
            try LedgerQueries.supportRecord(
                app: app, environment: environment, purchaseID: purchaseID, transactionID: transactionID, in: $0)
        }
    }

    public func grantedTransactions(orderID: String, app: AppScope) async throws -> [(AppleEnvironment, String)] {
        try await dialect.read { try LedgerQueries.grantedTransactions(orderID: orderID, app: app, in: $0) }
    }

    public func reportedTransactions(appAccountToken: String, app: AppScope) async throws
        -> [(AppleEnvironment, String)]
    {
        try await dialect.read {
            try LedgerQueries.reportedTransactions(appAccountToken: appAccountToken, app: app, in: $0)
        }
    }

    // MARK: Offsets

    public func recordOffsets(_ offsets: [ConsumedPartition: Int64], group: String) async throws {
        guard !offsets.isEmpty else { return }
        try await dialect.write { try LedgerQueries.recordOffsets(offsets, group: group, in: $0) }
    }

    public func recordedOffsets(group: String) async throws -> RecordedOffsets {
        try await dialect.read { try LedgerQueries.recordedOffsets(group: group, in: $0) }
    }

    // MARK: Upkeep

    public func pruneResults(decidedBefore cutoff: Date) async throws -> Int {
        try await prune(LedgerQueries.doomedResults, cutoff: cutoff)
    }

    public func prune(_ retention: Retention) async throws -> [Retention.Kind: Int] {
        var deleted: [Retention.Kind: Int] = [:]
        for kind in Retention.Kind.allCases {
            guard let cutoff = retention.cutoff(kind) else { continue }
            deleted[kind] = try await prune({ LedgerQueries.doomed(kind, $0) }, cutoff: cutoff)
        }
        return deleted
    }

    /// Deletes what `doomed` names, 10,000 rows a transaction, until fewer come back; 0 at once when another
    /// replica is pruning.
    private func prune(_ doomed: @escaping @Sendable (SQLSpelling) -> (table: String, condition: String), cutoff: Date)
        async throws -> Int
    {
        var total = 0
        while true {
            let deleted = try await dialect.write { session in
                let (table, condition) = doomed(session.spelling)
                return try LedgerQueries.pruneBatch(table: table, condition: condition, cutoff: cutoff, in: session)
            }
            guard let deleted else { return total }
            total += deleted
            if deleted < 10_000 { return total }
        }
    }

    public func ping() async throws { try await dialect.ping() }

    public func close() async { await dialect.close() }
}

extension LedgerEngine {
    /// A ledger in one SQLite file (`:memory:`: in memory, for tests). `defaultBundleID`: the default app's bundle
    /// id, recorded in the file on first use (``LedgerQueries/checkDefaultApp(_:in:)``).
    public static func sqlite(path: String, defaultBundleID: String? = nil) throws -> LedgerEngine {
        LedgerEngine(dialect: try SQLiteDialect(path: path, defaultBundleID: defaultBundleID))
    }
}
