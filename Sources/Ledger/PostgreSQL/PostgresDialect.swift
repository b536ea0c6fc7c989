import Foundation
import Observability
import Synchronization
import Vocabulary

/// The ledger in PostgreSQL, shared by every replica. Unique constraints (a purchase granted once in its app
/// and environment, an order granted once in its app) make the claim safe under any number of concurrent
/// writers: a second writer of the same row waits for the first to commit, then sees its row.
final class PostgresDialect: LedgerDialect {
    let pool: PostgresPool
    let schema: PostgresSchema
    let spelling: SQLSpelling
    let concurrentBatches: Int
    /// None: the server's commits are its own, and a batch already waits for a connection's round trip.
    var recordGathering: Duration { .zero }

    /// `migrate`: apply missing migrations at start-up (`ledger.migrate_on_start`); without it a schema that
    /// lacks some is waited for, saying what to run, until a migration Job (or `ledger migrate`) applies them.
    /// `giveUpAfter`: a command's bound on opening (nil: a worker waits for its database as long as it takes).
    init(url: String, poolSize: Int, schema: PostgresSchema, migrate: Bool = true, giveUpAfter: Duration? = nil)
        async throws
    {
        let logger = Logger(label: "ledger")
        pool = try await PostgresPool(url: url, size: poolSize, logger: logger, giveUpAfter: giveUpAfter) {
            connection in
            if migrate {
                _ = try schema.migrate(on: connection, logger: logger)
                return
            }
            let pending = try schema.pending(on: connection)
            guard pending.isEmpty else {
                throw LedgerError(
                    .notMigrated,
                    "schema \(schema.name) lacks migration(s) \(pending.map { String($0.version) }.joined(separator: ", "))"
                        + " that this release needs, and ledger.migrate_on_start is false: run `receipt-worker ledger"
                        + " migrate` (in Kubernetes, the migration Job: deploy/kubernetes/migrate-job.yaml)")
            }
            try schema.checkDefaultApp(on: connection)
        }
        self.schema = schema
        spelling = Self.spelling(schema: schema.name)
        // At most two batches of each kind at once, on half the connections each (a burst of one kind never
        // starves the other): under load the batches grow instead of multiplying. Measured on one 2-core
        // machine, 20,000 jobs: eight record batches at once cost 248 µs of PostgreSQL and 0.066 transaction ids
        // per job, two cost 138 µs and 0.024 (docs/benchmarks.md, "The ledger as it grows").
        concurrentBatches = min(max(1, poolSize / 2), 2)
    }

    static func spelling(schema: String) -> SQLSpelling {
        SQLSpelling(
            schemaPrefix: schema + ".", time: { "to_timestamp(?\($0)::double precision)" },
            readTime: { "extract(epoch FROM \($0))::text" }, now: "now()", forUpdate: " FOR UPDATE",
            forUpdateSkipLocked: " FOR UPDATE SKIP LOCKED", rowID: "ctid",
            eventMember: { column, member in "\(schema).event_json(\(column))->>'\(member)'" })
    }

    var poolStats: LedgerPoolStats? { pool.stats }

    /// The ledger's deadlines set for the transaction alone (``PostgresConnection/transaction(_:_:)``): no session
    /// state, whatever pooler is in front.
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        let spelling = spelling
        return try await pool.withConnection { connection in
            try connection.transaction { try body(PostgresSession(connection: connection, spelling: spelling)) }
        }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        let spelling = spelling
        return try await pool.withConnection { try body(PostgresSession(connection: $0, spelling: spelling)) }
    }

    /// One statement (``PostgresSchema/claimFunctionsV2``): the locks of the batch's purchases, then what the
    /// ledger holds about them, read after the locks with a snapshot of its own (READ COMMITTED), so a grant
    /// another replica committed while this batch waited for a lock is seen.
    ///
    /// Each purchase is locked by its identity and by its transaction alone: a refund or revocation that names the
    /// purchase by its transaction (a family member's, a REVOKE) takes that lock, and must wait for, or be seen by,
    /// a claim of the same transaction under its identity (else each commits without seeing the other, and the
    /// grant is never revoked). All the keys are taken in one sorted order, in the function.
    func claimFacts(_ decisions: [Decision], in session: any SQLSession) throws -> ClaimFacts {
        let claims = decisions.compactMap { decision in decision.grant.map { (decision.key.app, $0) } }
        func array(_ values: [String]) -> SQLValue { .text(PostgresArray.literal(values)) }
        let locks = claims.flatMap { app, grant in
            [grant.purchaseID, .transaction(grant.transactionID)].map {
                PurchaseStatements.lockKey(PurchaseKey(app: app, environment: grant.environment, purchaseID: $0))
            }
        }
        let rows = try session.rows(
            """
            SELECT * FROM \(schema.name).claim_facts_v2(?1::text[], ?2::text[], ?3::text[], ?4::text[], ?5::text[],
                ?6::text[], ?7::text[], ?8::text[])
            """,
            [
                array(locks),
                array(decisions.map(\.key.app.rawValue)), array(decisions.map(\.key.jobID)),
                array(claims.map { $0.0.rawValue }), array(claims.map { $0.1.environment.rawValue }),
                array(claims.map { $0.1.transactionID }), array(claims.map { $0.1.purchaseID.key }),
                array(claims.map { $0.1.orderID }),
            ])
        var facts = ClaimFacts()
        for row in rows {
            switch row.text(0) {
            case "r":
                facts.addResult(
                    app: AppScope(row.text(1) ?? ""), jobID: row.text(2) ?? "", fingerprint: row.text(3) ?? "",
                    row.event(from: 4))
            case "g": facts.addGrant(row.grantFact(from: 1))
            default: facts.addRefund(row.refundFact(from: 1))
            }
        }
        return facts
    }

    /// One statement for the whole batch (``PostgresSchema/claimFunctionsV2``).
    func claimWrite(_ decisions: [Decision], _ results: [ClaimResult], in session: any SQLSession) throws {
        let decided = zip(decisions, results)
        let grants = decided.compactMap { decision, result in
            result.grant.map { (decision.key.app, $0, result.revokedAt) }
        }
        let stored = decided.flatMap { decision, result in
            [
                result.result.map { (decision.key, $0) },
                result.followUp.map { (ClaimRules.followUpKey(decision.key), $0) },
            ]
            .compactMap { $0 }
        }
        guard !grants.isEmpty || !stored.isEmpty else { return }
        func array<T>(_ rows: [T], _ value: (T) -> String?) -> SQLValue {
            .text(PostgresArray.literal(rows.map(value)))
        }
        try session.rows(
            """
            SELECT \(schema.name).claim_write_v2(?1::text[], ?2::text[], ?3::text[], ?4::text[], ?5::text[], ?6::text[],
                ?7::text[], ?8::integer[], ?9::text[], ?10::bigint[], ?11::double precision[], ?12::text[],
                ?13::text[], ?14::text[], ?15::text[], ?16::text[], ?17::text[], ?18::text[], ?19::text[])::text
            """,
            [
                array(grants) { $0.0.rawValue }, array(grants) { $0.1.environment.rawValue },
                array(grants) { $0.1.transactionID }, array(grants) { $0.1.orderID },
                array(grants) { $0.1.purchaseID.key }, array(grants) { $0.1.userID },
                array(grants) { $0.1.productID }, array(grants) { String($0.1.quantity) },
                array(grants) { $0.1.purchaseID.isBillingPeriod ? $0.1.originalTransactionID : nil },
                array(grants) { $0.1.revenue.map(String.init) },
                array(grants) { $0.2.map { String($0.timeIntervalSince1970) } },
                array(stored) { $0.0.app.rawValue }, array(stored) { $0.0.jobID }, array(stored) { $0.0.fingerprint },
                array(stored) { String(decoding: $0.1.json, as: UTF8.self) }, array(stored) { $0.1.eventID },
                array(stored) { $0.1.type }, array(stored) { $0.1.time }, array(stored) { $0.1.key },
            ])
    }

    /// One statement (``PostgresSchema/purchaseFactsFunction``): whether the notification was handled; if not,
    /// the purchase's lock, then its grant and state read after it.
    func purchaseFacts(_ query: PurchaseFactsQuery, in session: any SQLSession) throws -> PurchaseFacts {
        let purchase = query.purchase
        let rows = try session.rows(
            "SELECT * FROM \(schema.name).purchase_facts(?1, ?2, ?3, ?4, ?5, ?6, ?7::boolean)",
            [
                .text(query.notificationID),
                .optional(purchase.flatMap { query.locks ? PurchaseStatements.lockKey($0) : nil }),
                .optional(purchase?.app.rawValue), .optional(purchase?.environment.rawValue),
                .text(query.transactionID), .optional(purchase?.purchaseID.key), .bool(query.readsState),
            ])
        var facts = PurchaseFacts()
        for row in rows {
            let columns = SQLRow(cells: Array(row.cells.dropFirst()))
            switch row.text(0) {
            case "n": facts.handled = HandledNotification(event: columns.bytes(4) == nil ? nil : columns.event())
            case "g": facts.grant = LedgerQueries.grant(columns)
            default:
                facts.state = columns.time(1).map {
                    PurchaseState(revoked: columns.bool(0), at: $0, share: columns.int(2))
                }
            }
        }
        return facts
    }

    /// One query for many jobs' stored events, every fingerprint of their job ids (``LedgerQueries/answer(_:among:)``
    /// picks each job's).
    func storedDecisions(_ keys: [DecisionKey], in session: any SQLSession) throws -> [StoredEvent?] {
        let rows = try session.rows(
            "SELECT * FROM \(schema.name).stored_results(?1::text[], ?2::text[])",
            [
                .text(PostgresArray.literal(keys.map(\.app.rawValue))),
                .text(PostgresArray.literal(keys.map(\.jobID))),
            ])
        var byJob: [String: [(fingerprint: String, event: StoredEvent)]] = [:]
        for row in rows {
            guard let app = row.text(0), let job = row.text(1), let fingerprint = row.text(2) else { continue }
            byJob[app + "\u{0}" + job, default: []].append((fingerprint, row.event(from: 3)))
        }
        return keys.map { LedgerQueries.answer($0, among: byJob[$0.app.rawValue + "\u{0}" + $0.jobID] ?? []) }
    }

    /// Writable, not merely reachable: a failover replica answers SELECT 1 but refuses every decision.
    /// Thrown inside the connection's call, as a read-only server's refusal is, so the pool replaces it.
    func ping() async throws {
        try await pool.withConnection {
            let readOnly = try $0.query("SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'")
            guard readOnly.first != "t" else {
                var error = LedgerError(.unavailable, "postgresql: the server is read-only (a standby?)")
                error.sqlstate = "25006"
                throw error
            }
        }
    }

    func close() async { pool.close() }
}

/// A statement of the ledger's on PostgreSQL: `?n` written `$n`, parameters as text (times as seconds since the
/// epoch, for ``SQLSpelling/time(_:)``'s `to_timestamp`).
struct PostgresSession: SQLSession {
    let connection: PostgresConnection
    let spelling: SQLSpelling

    func rows(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow] {
        try connection.rows(Self.numbered(sql), parameters.map(Self.text)).map { row in
            SQLRow(cells: row.map { $0.map(SQLRow.Cell.text) ?? .null })
        }
    }

    func lock(_ key: String) throws {
        try connection.query("SELECT pg_advisory_xact_lock(hashtext($1))", [key])
    }

    func tryLock(_ key: Int) throws -> Bool {
        try connection.query("SELECT pg_try_advisory_xact_lock(\(key))").first == "t"
    }

    /// One statement: the first writes each a data-modifying `WITH` of the last (PostgreSQL runs every one of
    /// them, to completion, on one snapshot: none sees another's rows, which is why they must touch different
    /// tables), their parameters numbered on.
    func run(_ writes: [SQLStatement]) throws {
        guard let last = writes.last else { return }
        var parameters: [SQLValue] = []
        var parts: [String] = []
        for write in writes {
            parts.append(Self.shifting(write.sql, by: parameters.count))
            parameters += write.parameters
        }
        let with = parts.dropLast().enumerated().map { "w\($0.offset) AS (\($0.element))" }
        _ = try rows(
            with.isEmpty ? last.sql : "WITH " + with.joined(separator: ", ") + " " + parts[parts.count - 1], parameters)
    }

    /// `?n` as `?(n + offset)`: a statement's parameters after those of the statements before it.
    static func shifting(_ sql: String, by offset: Int) -> String {
        guard offset > 0 else { return sql }
        var out = ""
        var number = ""
        func flush() {
            if let n = Int(number) { out += String(n + offset) }
            number = ""
        }
        var inParameter = false
        for character in sql {
            if inParameter, character.isASCII, character.isNumber {
                number.append(character)
                continue
            }
            if inParameter { flush() }
            inParameter = character == "?"
            out.append(character)
        }
        if inParameter { flush() }
        return out
    }

    static func text(_ value: SQLValue) -> String? {
        switch value {
        case .text(let text): text
        case .integer(let number): String(number)
        case .bool(let flag): flag ? "true" : "false"
        case .time(let date): String(date.timeIntervalSince1970)
        case .bytes(let bytes): String(decoding: bytes, as: UTF8.self)
        case .null: nil
        }
    }

    /// `?n` as PostgreSQL's `$n`: the ledger's statements hold no `?` of their own (no string literal, no jsonb
    /// operator with one). Each text rewritten once.
    static func numbered(_ sql: String) -> String {
        if let known = rewritten.withLock({ $0[sql] }) { return known }
        var out = ""
        out.reserveCapacity(sql.utf8.count)
        for character in sql { out.append(character == "?" ? "$" : character) }
        rewritten.withLock { $0[sql] = out }
        return out
    }

    private static let rewritten = Mutex<[String: String]>([:])
}
