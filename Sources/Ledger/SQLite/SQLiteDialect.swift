import Dispatch
import Foundation
import Observability
import Synchronization
import Vocabulary

/// The ledger in one SQLite file, for a single host (`sqlite::memory:`: in memory, for tests). Every statement
/// runs on one serial queue (SQLite has one writer at a time anyway), off Swift's cooperative pool; WAL keeps
/// readers out of the writer's way.
final class SQLiteDialect: LedgerDialect, Sendable {
    private let queue = DispatchQueue(label: "ledger.sqlite")
    /// Only ever taken on `queue`, so never waited for: the lock is there for the compiler, which then sees that
    /// nothing else touches the connection.
    private let connection: Mutex<SQLiteConnection>
    private let path: String
    /// The file this ledger opened (device and inode): decisions written after it was deleted or replaced
    /// would be lost at the next start, and its grants granted again. Nil in memory.
    private let identity: FileIdentity?

    static let spelling = SQLSpelling(
        schemaPrefix: "", time: { "?\($0)" }, readTime: { $0 }, now: "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
        forUpdate: "", forUpdateSkipLocked: "", rowID: "rowid",
        eventMember: { column, member in
            "CASE WHEN json_valid(CAST(\(column) AS TEXT)) THEN json_extract(CAST(\(column) AS TEXT), '$.\(member)') END"
        })

    /// `defaultBundleID`: the default app's bundle id (`apple.bundle_id`), recorded in the file on first use.
    init(path: String, defaultBundleID: String? = nil) throws {
        let connection = try SQLiteConnection(path: path)
        self.path = path
        identity = path == ":memory:" ? nil : FileIdentity(path: path)
        if path != ":memory:" && identity == nil {
            throw LedgerError(.unavailable, "sqlite \(path): the file cannot be read after opening it")
        }
        try connection.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;")
        try SQLiteSchema.migrate(connection)
        try SQLiteSchema.checkDefaultApp(connection, defaultBundleID: defaultBundleID)
        // Temporary files (statement journals, sorts) in memory: written to disk they cost a large share of the
        // ledger's CPU in a batch's transaction. Set after the migrations, whose one-off statements over whole
        // tables may need much more.
        try connection.execute("PRAGMA temp_store = MEMORY;")
        self.connection = Mutex(connection)
    }

    /// One at a time: SQLite has one writer; what arrives meanwhile waits and goes in the next commit (group
    /// commit: one WAL commit for a batch instead of one each; the writes and the fsyncs were a quarter of the
    /// worker's CPU).
    var concurrentBatches: Int { 1 }
    var poolStats: LedgerPoolStats? { nil }

    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await onQueue { connection in
            try self.checkFile()
            try connection.execute("BEGIN IMMEDIATE")
            do {
                let result = try body(SQLiteSession(connection: connection))
                try connection.execute("COMMIT")
                return result
            } catch {
                try? connection.execute("ROLLBACK")  // the original error is the one to report
                throw error
            }
        }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await onQueue { connection in try body(SQLiteSession(connection: connection)) }
    }

    private func onQueue<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await queue.perform { try self.connection.withLock { connection in try body(connection) } }
    }

    /// Each query an exact key of an index: an OR of columns would make SQLite read every grant of the app and
    /// environment.
    func claimFacts(_ decisions: [Decision], in session: any SQLSession) throws -> ClaimFacts {
        var facts = ClaimFacts()
        for decision in decisions {
            let key = decision.key
            for row in try session.rows(
                """
                SELECT fingerprint, event_id, event_type, event_time, event_key, event FROM results
                    WHERE app = ?1 AND job_id = ?2 AND fingerprint IN (?3, '', ?4)
                """,
                [
                    .text(key.app.rawValue), .text(key.jobID), .text(key.fingerprint),
                    .text(ClaimRules.followUpKey(key).fingerprint),
                ])
            {
                facts.addResult(app: key.app, jobID: key.jobID, fingerprint: row.text(0) ?? "", row.event(from: 1))
            }
            guard let grant = decision.grant else { continue }
            let app = SQLValue.text(key.app.rawValue)
            let scope: [SQLValue] = [
                app, .text(grant.environment.rawValue), .text(grant.transactionID), .text(grant.purchaseID.key),
            ]
            let grants =
                try session.rows(
                    Self.grantFactColumns + " WHERE app = ?1 AND environment = ?2 AND transaction_id IN (?3, ?4)"
                        + " UNION ALL " + Self.grantFactColumns
                        + " WHERE app = ?1 AND environment = ?2 AND purchase_id = ?4",
                    scope)
                + session.rows(
                    Self.grantFactColumns + " WHERE app = ?1 AND order_id = ?2 AND credit = 'job'",
                    [app, .text(grant.orderID)])
            for row in grants {
                facts.addGrant(
                    GrantFact(
                        app: AppScope(row.text(0) ?? ""), environment: row.text(1) ?? "",
                        transactionID: row.text(2) ?? "", purchaseID: row.text(3) ?? "", orderID: row.text(4) ?? "",
                        isJobGrant: row.bool(5), creditEventID: row.text(6), revoked: row.bool(7),
                        revenue: row.int64(8)))
            }
            let refunds = "SELECT app, environment, purchase_id, transaction_id, revoked_share, changed_at"
            for row in try session.rows(
                """
                \(refunds) FROM purchase_states WHERE app = ?1 AND environment = ?2 AND purchase_id = ?4 AND revoked
                UNION ALL \(refunds) FROM purchase_states
                    WHERE app = ?1 AND environment = ?2 AND transaction_id = ?3 AND revoked
                UNION ALL \(refunds) FROM purchase_states
                    WHERE app = '*' AND (purchase_id = ?4 OR transaction_id = ?3) AND revoked
                """, scope)
            {
                facts.addRefund(
                    RefundFact(
                        app: row.text(0) ?? "", environment: row.text(1) ?? "", purchaseID: row.text(2) ?? "",
                        transactionID: row.text(3) ?? "", share: row.int(4), at: row.time(5)))
            }
        }
        return facts
    }

    private static let grantFactColumns = """
        SELECT app, environment, transaction_id, purchase_id, order_id, credit = 'job', credit_event_id,
            revoked_at IS NOT NULL, revenue FROM grants
        """

    /// A job's grant, not its event (its result row keeps it): what later events name has columns of its own.
    func claimWrite(_ decided: [(Decision, ClaimResult)], in session: any SQLSession) throws {
        for (decision, result) in decided {
            if let grant = result.grant {
                try session.rows(
                    """
                    INSERT INTO grants (app, environment, transaction_id, order_id, purchase_id, user_id, product_id,
                        quantity, original_transaction_id, revenue, revoked_at)
                        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                    """,
                    [
                        .text(decision.key.app.rawValue), .text(grant.environment.rawValue),
                        .text(grant.transactionID), .text(grant.orderID), .text(grant.purchaseID.key),
                        .text(grant.userID), .text(grant.productID), .integer(grant.quantity),
                        grant.purchaseID.isBillingPeriod ? .optional(grant.originalTransactionID) : .null,
                        .optional(grant.revenue), .optional(result.revokedAt),
                    ])
            }
            if let event = result.result { try LedgerQueries.insertResult(decision.key, event: event, in: session) }
            if let followUp = result.followUp {
                try LedgerQueries.insertResult(ClaimRules.followUpKey(decision.key), event: followUp, in: session)
            }
        }
    }

    func storedDecisions(_ keys: [DecisionKey], in session: any SQLSession) throws -> [StoredEvent?] {
        try keys.map { try LedgerQueries.storedDecision($0, in: session) }
    }

    /// Writes, as a decision would: a lock held by another process, a full disk or a read-only file fail
    /// here, and a ledger file deleted or replaced under the worker is refused.
    func ping() async throws {
        _ = try await write { session in
            try session.rows("CREATE TABLE IF NOT EXISTS health (id INTEGER PRIMARY KEY, checked_at TEXT NOT NULL)", [])
            return try session.rows(
                "INSERT OR REPLACE INTO health (id, checked_at) VALUES (1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))", []
            ).count
        }
    }

    func close() async {
        await withCheckedContinuation { continuation in
            queue.async {
                self.connection.withLock { $0.close() }
                continuation.resume()
            }
        }
    }

    /// Refuses to go on when the ledger's file is no longer the one opened (deleted, or replaced by a
    /// restore or another file): every decision from then on would be lost at the next start.
    private func checkFile() throws {
        guard let identity else { return }
        guard FileIdentity(path: path) == identity else {
            throw LedgerError(
                .replaced,
                "sqlite \(path): the ledger file was deleted or replaced; restart the worker on the right file")
        }
    }
}

/// A statement of the ledger's on SQLite: parameters as SQLite keeps them (times as RFC 3339 text, booleans
/// as 0 and 1), each statement prepared once (``SQLiteConnection``).
struct SQLiteSession: SQLSession {
    let connection: SQLiteConnection
    var spelling: SQLSpelling { SQLiteDialect.spelling }

    func rows(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow] {
        var rows: [SQLRow] = []
        try connection.query(sql, parameters.map(Self.value)) { row in rows.append(row.cells) }
        return rows
    }

    func lock(_ key: String) throws {}  // BEGIN IMMEDIATE holds the only write lock

    func tryLock(_ key: Int) throws -> Bool { true }

    static func value(_ value: SQLValue) -> SQLiteConnection.Value {
        switch value {
        case .text(let text): .text(text)
        case .integer(let number): .integer(Int(number))
        case .bool(let flag): .integer(flag ? 1 : 0)
        case .time(let date): .text(Timestamp.rfc3339(date))
        case .bytes(let bytes): .blob(bytes)
        case .null: .null
        }
    }
}

/// A file's device and inode.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}

/// The ledger's own times, `2026-11-30T17:26:36.233Z`, read by hand (a formatter per row cost more than
/// the query).
enum RFC3339Milliseconds {
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 30, bytes.last == UInt8(ascii: "Z"), bytes[4] == UInt8(ascii: "-"),
            bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
            bytes[16] == UInt8(ascii: ":")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else { return nil }
        var milliseconds = 0
        if bytes.count > 20 {
            let fraction = bytes[20..<(bytes.count - 1)]
            guard bytes[19] == UInt8(ascii: "."), (1...9).contains(fraction.count),
                let digits = number(20..<(bytes.count - 1))
            else { return nil }
            milliseconds = fraction.count >= 3 ? digits / pow10(fraction.count - 3) : digits * pow10(3 - fraction.count)
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        return Date(timeIntervalSince1970: Double(timegm(&parts)) + Double(milliseconds) / 1000)
    }

    private static func pow10(_ exponent: Int) -> Int { (0..<exponent).reduce(1) { value, _ in value * 10 } }
}
