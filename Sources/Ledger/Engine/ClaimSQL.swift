import Synchronization

/// The statements every job runs (its stored answers, its claim's facts and writes), spelled once per ledger
/// schema: built by interpolation at every call, they cost a few microseconds of a job's CPU in string building
/// before the statement cache could even look them up.
struct ClaimSQL: Sendable {
    let storedResults: String
    let grantsByTransaction: String
    let grantsByOrder: String
    let refunds: String
    let insertGrant: String
    let insertResult: String

    private init(_ spelling: SQLSpelling) {
        let table = spelling.table
        // Each value its own probe of the key, never `IN (…)`: SQLite builds a temporary b-tree of an IN list's
        // values at every run of the statement (a pager and its page cache: a dozen allocations), where a probe that
        // a condition on the parameters alone skips costs nothing. Those conditions compare texts: every parameter
        // of these statements is bound as text, never NULL (`SQLiteClaimPlanTests` holds the plans to it).
        let results = """
            SELECT fingerprint, event_id, event_type, event_time, event_key, event FROM \(table("results"))
                WHERE app = ?1 AND job_id = ?2 AND fingerprint =
            """
        storedResults = """
            \(results) ?3 UNION ALL \(results) '' AND ?3 <> '' UNION ALL \(results) ?4 AND ?4 <> ?3 AND ?4 <> ''
            """
        let grantFacts = """
            SELECT app, environment, transaction_id, purchase_id, order_id, credit = 'job', credit_event_id,
                revoked_at IS NOT NULL, revenue FROM \(table("grants"))
            """
        grantsByTransaction =
            grantFacts + " WHERE app = ?1 AND environment = ?2 AND transaction_id = ?3"
            + " UNION ALL " + grantFacts + " WHERE app = ?1 AND environment = ?2 AND transaction_id = ?4 AND ?4 <> ?3"
            + " UNION ALL " + grantFacts + " WHERE app = ?1 AND environment = ?2 AND purchase_id = ?4"
        grantsByOrder = grantFacts + " WHERE app = ?1 AND order_id = ?2 AND credit = 'job'"
        let refundFacts = """
            SELECT app, environment, purchase_id, transaction_id, revoked_share,
                \(spelling.readTime("changed_at")) FROM \(table("purchase_states"))
            """
        // The last two: refunds remembered before the ledger had apps, which its migration (a release before
        // 1.0.0) left with app and environment '*'. Each arm one whole key: the app alone, or an OR of the two ids,
        // read every such row at every claim.
        refunds = """
            \(refundFacts) WHERE app = ?1 AND environment = ?2 AND purchase_id = ?4 AND revoked
            UNION ALL \(refundFacts) WHERE app = ?1 AND environment = ?2 AND transaction_id = ?3 AND revoked
            UNION ALL \(refundFacts) WHERE app = '*' AND environment = '*' AND purchase_id = ?4 AND revoked
            UNION ALL \(refundFacts) WHERE app = '*' AND environment = '*' AND transaction_id = ?3 AND revoked
            """
        insertGrant = """
            INSERT INTO \(table("grants")) (app, environment, transaction_id, order_id,
                purchase_id, user_id, product_id, quantity, original_transaction_id, revenue, revoked_at)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, \(spelling.time(11)))
            """
        insertResult = """
            INSERT INTO \(table("results")) (app, job_id, fingerprint, event_id, event_type,
                event_time, event_key, event) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
            """
    }

    private static let spelled = Mutex<[String: ClaimSQL]>([:])

    /// The statements in `spelling`'s schema and dialect.
    static func of(_ spelling: SQLSpelling) -> ClaimSQL {
        let key = spelling.schemaPrefix + "\u{0}" + spelling.rowID
        return spelled.withLock { known in
            if let statements = known[key] { return statements }
            let statements = ClaimSQL(spelling)
            known[key] = statements
            return statements
        }
    }
}
