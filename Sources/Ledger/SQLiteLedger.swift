import CSQLite
import Dispatch
import Foundation
import Observability

/// The ledger in one SQLite file, for a single host. Every statement runs on one serial queue (SQLite has
/// one writer at a time anyway), off Swift's cooperative pool; WAL keeps readers out of the writer's way.
///
/// `@unchecked Sendable`: the connection and statements are touched only on `queue`.
public final class SQLiteLedger: Ledger, @unchecked Sendable {
    private let queue = DispatchQueue(label: "ledger.sqlite")
    private var db: OpaquePointer?
    private let path: String
    /// The file this ledger opened (device and inode): decisions written after it was deleted or replaced
    /// would be lost at the next start, and its grants granted again.
    private let identity: (device: UInt64, inode: UInt64)?

    public init(path: String) throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(handle)
            throw LedgerError("sqlite \(path): \(message)")
        }
        db = handle
        self.path = path
        identity = Self.fileIdentity(path)
        try execute(
            """
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = NORMAL;
            PRAGMA busy_timeout = 5000;
            CREATE TABLE IF NOT EXISTS grants (
                transaction_id TEXT PRIMARY KEY,
                order_id TEXT NOT NULL UNIQUE,
                granted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
            CREATE TABLE IF NOT EXISTS results (
                job_id TEXT PRIMARY KEY,
                event BLOB NOT NULL,
                decided_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
            """)
        try migrate()
    }

    /// Schema versions, in `PRAGMA user_version`: 0 the first ledger; 1 adds the purchase identity
    /// (`grants.purchase_id`, unique), filled for existing grants with their transaction id, which is the
    /// purchase identity of a consumable and of a first purchase.
    private func migrate() throws {
        try migrateToPurchaseIdentity()
        try migrateToAfterGrant()
    }

    /// Version 2: the grant's event kept with it, its revocation, each App Store notification handled (once),
    /// open consumption requests, and the index pruning uses.
    private func migrateToAfterGrant() throws {
        guard let version = try queryText("PRAGMA user_version", []).flatMap(Int.init), version < 2 else { return }
        try execute("BEGIN IMMEDIATE")
        do {
            let columns = try queryRows("SELECT name, '' FROM pragma_table_info('grants')", []).map(\.0)
            if !columns.contains("event") { try execute("ALTER TABLE grants ADD COLUMN event BLOB") }
            if !columns.contains("revoked_at") { try execute("ALTER TABLE grants ADD COLUMN revoked_at TEXT") }
            try execute(
                """
                CREATE TABLE IF NOT EXISTS notifications (
                    notification_id TEXT PRIMARY KEY,
                    event BLOB,
                    handled_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
                CREATE TABLE IF NOT EXISTS purchase_states (
                    purchase_id TEXT PRIMARY KEY,
                    transaction_id TEXT NOT NULL,
                    revoked INTEGER NOT NULL,
                    changed_at TEXT NOT NULL);
                CREATE INDEX IF NOT EXISTS purchase_states_transaction_id ON purchase_states (transaction_id);
                CREATE TABLE IF NOT EXISTS consumption_requests (
                    transaction_id TEXT PRIMARY KEY,
                    notification_id TEXT NOT NULL,
                    respond_by TEXT NOT NULL,
                    requested_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
                    answered_at TEXT);
                CREATE INDEX IF NOT EXISTS results_decided_at ON results (decided_at);
                PRAGMA user_version = 2;
                COMMIT;
                """)
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    private func migrateToPurchaseIdentity() throws {
        guard let version = try queryText("PRAGMA user_version", []).flatMap(Int.init), version < 1 else { return }
        try execute("BEGIN IMMEDIATE")
        do {
            let columns = try queryRows("SELECT name, '' FROM pragma_table_info('grants')", []).map(\.0)
            if !columns.contains("purchase_id") { try execute("ALTER TABLE grants ADD COLUMN purchase_id TEXT") }
            try execute(
                """
                UPDATE grants SET purchase_id = transaction_id WHERE purchase_id IS NULL;
                CREATE UNIQUE INDEX IF NOT EXISTS grants_purchase_id ON grants (purchase_id);
                CREATE TRIGGER IF NOT EXISTS grants_fill_purchase_id AFTER INSERT ON grants
                    WHEN NEW.purchase_id IS NULL
                    BEGIN UPDATE grants SET purchase_id = NEW.transaction_id WHERE rowid = NEW.rowid; END;
                PRAGMA user_version = 1;
                COMMIT;
                """)
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    deinit {
        sqlite3_close(db)
    }

    public func record(jobID: String, claim: LedgerClaim, event: Data) async throws -> LedgerOutcome {
        try await queue.perform {
            try self.checkFile()
            return try self.recordNow(jobID: jobID, claim: claim, event: event)
        }
    }

    public func storedEvent(jobID: String) async throws -> Data? {
        try await queue.perform { try self.queryBlob("SELECT event FROM results WHERE job_id = ?1", [jobID]) }
    }

    public func pruneResults(decidedBefore cutoff: Date) async throws -> Int {
        // decided_at is RFC 3339 in UTC with milliseconds: text order is time order.
        let since = Timestamp.rfc3339(cutoff)
        var total = 0
        while true {
            let deleted = try await queue.perform {
                try self.checkFile()
                try self.run(
                    "DELETE FROM results WHERE rowid IN (SELECT rowid FROM results WHERE decided_at < ?1 LIMIT 10000)",
                    [since])
                return Int(sqlite3_changes(self.db))
            }
            total += deleted
            if deleted < 10_000 { return total }
        }
    }

    public func grant(purchaseID: String?, transactionID: String) async throws -> GrantRecord? {
        try await queue.perform {
            let statement = try self.prepare(
                """
                SELECT order_id, transaction_id, event, revoked_at IS NOT NULL,
                    (SELECT respond_by FROM consumption_requests WHERE transaction_id = ?1)
                FROM grants WHERE transaction_id = ?1 OR purchase_id = ?1 OR purchase_id = ?2
                ORDER BY transaction_id = ?1 DESC LIMIT 1
                """, [transactionID, purchaseID ?? transactionID])
            defer { sqlite3_finalize(statement) }
            let step = sqlite3_step(statement)
            guard step == SQLITE_ROW else {
                guard step == SQLITE_DONE else {
                    throw LedgerError("sqlite: \(String(cString: sqlite3_errmsg(self.db)))")
                }
                return nil
            }
            func text(_ column: Int32) -> String? { sqlite3_column_text(statement, column).map { String(cString: $0) } }
            let event = sqlite3_column_blob(statement, 2).map {
                Data(bytes: $0, count: Int(sqlite3_column_bytes(statement, 2)))
            }
            return GrantRecord(
                orderID: text(0) ?? "", transactionID: text(1) ?? "", event: event,
                revoked: sqlite3_column_int(statement, 3) == 1,
                consumptionRespondBy: text(4).flatMap(Self.parseTime))
        }
    }

    public func storedNotification(id: String) async throws -> Data?? {
        try await queue.perform { try self.storedNotificationNow(id) }
    }

    public func recordNotification(id: String, change: PurchaseChange, event: Data?, grantedOrder: String?)
        async throws -> NotificationRecord
    {
        try await queue.perform {
            try self.checkFile()
            // One writer at a time (BEGIN IMMEDIATE): a grant and a revocation of one purchase never interleave.
            try self.execute("BEGIN IMMEDIATE")
            do {
                if let stored = try self.storedNotificationNow(id) {
                    try self.execute("COMMIT")
                    return .replay(stored)
                }
                var published = event
                switch change {
                case .none: break
                case .revoke(let purchase, let transaction, let at), .reinstate(let purchase, let transaction, let at):
                    let revoke = if case .revoke = change { true } else { false }
                    let last = try self.queryRows(
                        "SELECT revoked, changed_at FROM purchase_states WHERE purchase_id = ?1", [purchase]
                    ).first.flatMap { row -> (revoked: Bool, at: Date)? in
                        Self.parseTime(row.1).map { (row.0 == "1", $0) }
                    }
                    let outcome = PurchaseStateRule.outcome(revoke: revoke, at: at, last: last)
                    if !outcome.changes { published = nil }
                    if outcome.applies {
                        try self.run(
                            """
                            INSERT INTO purchase_states (purchase_id, transaction_id, revoked, changed_at)
                                VALUES (?1, ?2, ?3, ?4)
                                ON CONFLICT (purchase_id) DO UPDATE SET transaction_id = excluded.transaction_id,
                                    revoked = excluded.revoked, changed_at = excluded.changed_at
                            """, [purchase, transaction, revoke ? "1" : "0", Timestamp.rfc3339(at)])
                        let orders = try self.queryRows(
                            "SELECT order_id, '' FROM grants WHERE purchase_id = ?1 OR transaction_id = ?2 OR purchase_id = ?2",
                            [purchase, transaction]
                        ).map(\.0)
                        if grantedOrder.map({ !orders.contains($0) }) ?? !orders.isEmpty { throw GrantChanged() }
                        try self.run(
                            "UPDATE grants SET revoked_at = "
                                + (revoke ? "coalesce(revoked_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))" : "NULL")
                                + " WHERE purchase_id = ?1 OR transaction_id = ?2 OR purchase_id = ?2",
                            [purchase, transaction])
                    }
                case .consumptionRequest(let transaction, let respondBy):
                    // A request delivered late (a backfill) never moves a newer one's deadline back.
                    try self.run(
                        """
                        INSERT INTO consumption_requests (transaction_id, notification_id, respond_by, requested_at)
                            VALUES (?1, ?2, ?3, ?4)
                            ON CONFLICT (transaction_id) DO UPDATE SET notification_id = excluded.notification_id,
                                respond_by = excluded.respond_by, requested_at = excluded.requested_at, answered_at = NULL
                                WHERE consumption_requests.respond_by < excluded.respond_by
                        """,
                        [
                            transaction, id, Timestamp.rfc3339(respondBy),
                            Timestamp.rfc3339(respondBy.addingTimeInterval(-12 * 3600)),
                        ])
                }
                if let published {
                    try self.run(
                        "INSERT INTO notifications (notification_id, event) VALUES (?1, ?2)", [id], blob: published)
                } else {
                    try self.run("INSERT INTO notifications (notification_id) VALUES (?1)", [id])
                }
                try self.execute("COMMIT")
                return .recorded(published)
            } catch {
                try? self.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// The stored event of a handled notification (`.some(nil)`: handled, no event); nil if never handled.
    private func storedNotificationNow(_ id: String) throws -> Data?? {
        let statement = try prepare("SELECT event FROM notifications WHERE notification_id = ?1", [id])
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { return nil }
        return .some(
            sqlite3_column_blob(statement, 0).map { Data(bytes: $0, count: Int(sqlite3_column_bytes(statement, 0))) })
    }

    public func answerConsumptionRequest(transactionID: String) async throws {
        try await queue.perform {
            try self.run(
                "UPDATE consumption_requests SET answered_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
                    + " WHERE transaction_id = ?1", [transactionID])
        }
    }

    public func oldestOpenConsumptionRequest() async throws -> Date? {
        try await queue.perform {
            try self.queryText(
                "SELECT min(requested_at) FROM consumption_requests WHERE answered_at IS NULL AND respond_by > ?1",
                [Timestamp.rfc3339(Date(timeIntervalSinceNow: -12 * 3600))]
            ).flatMap(Self.parseTime)
        }
    }

    /// An RFC 3339 time as this ledger writes it (UTC, milliseconds).
    private static func parseTime(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }

    /// Writes, as a decision would: a lock held by another process, a full disk or a read-only file fail
    /// here, and a ledger file deleted or replaced under the worker is refused.
    public func ping() async throws {
        try await queue.perform {
            try self.checkFile()
            try self.execute("BEGIN IMMEDIATE")
            do {
                try self.execute(
                    """
                    CREATE TABLE IF NOT EXISTS health (id INTEGER PRIMARY KEY, checked_at TEXT NOT NULL);
                    INSERT OR REPLACE INTO health (id, checked_at) VALUES (1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
                    COMMIT;
                    """)
            } catch {
                try? self.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// Refuses to go on when the ledger's file is no longer the one opened (deleted, or replaced by a
    /// restore or another file): every decision from then on would be lost at the next start.
    private func checkFile() throws {
        guard let identity, let now = Self.fileIdentity(path), now == identity else {
            throw LedgerError(
                "sqlite \(path): the ledger file was deleted or replaced; restart the worker on the right file")
        }
    }

    private static func fileIdentity(_ path: String) -> (device: UInt64, inode: UInt64)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    public func close() async {
        await withCheckedContinuation { continuation in
            queue.async {
                sqlite3_close(self.db)
                self.db = nil
                continuation.resume()
            }
        }
    }

    private func recordNow(jobID: String, claim: LedgerClaim, event: Data) throws -> LedgerOutcome {
        try execute("BEGIN IMMEDIATE")
        do {
            if let stored = try queryBlob("SELECT event FROM results WHERE job_id = ?1", [jobID]) {
                try execute("COMMIT")
                return .replay(stored)
            }
            if case .grant(let orderID, let transactionID, let purchase) = claim {
                let purchaseID = purchase ?? transactionID
                // Any grant of this transaction or of this purchase (under another transaction id).
                let owners = try queryRows(
                    "SELECT order_id, transaction_id FROM grants"
                        + " WHERE transaction_id = ?1 OR purchase_id = ?2 OR transaction_id = ?2",
                    [transactionID, purchaseID])
                // Refunded or revoked (an App Store notification), whether before or after a grant: never again.
                if try queryText(
                    "SELECT 1 FROM grants WHERE (transaction_id = ?1 OR purchase_id = ?2 OR transaction_id = ?2)"
                        + " AND revoked_at IS NOT NULL"
                        + " UNION ALL SELECT 1 FROM purchase_states WHERE (purchase_id = ?2 OR transaction_id = ?1) AND revoked",
                    [transactionID, purchaseID]) != nil
                {
                    try execute("ROLLBACK")
                    return .revoked
                }
                // Bytes, as SQLite compares them (Swift's == would call two spellings of "é" one order).
                if owners.contains(where: { !$0.0.utf8.elementsEqual(orderID.utf8) }) {
                    try execute("ROLLBACK")
                    return .duplicateTransaction
                }
                if !owners.isEmpty {
                    // This order holds the purchase: the same transaction again is the same grant; another
                    // transaction of the same purchase (a restore) is not a second grant of the order.
                    guard owners.contains(where: { $0.1.utf8.elementsEqual(transactionID.utf8) }) else {
                        try execute("ROLLBACK")
                        return .orderAlreadyFulfilled
                    }
                } else if try queryText("SELECT transaction_id FROM grants WHERE order_id = ?1", [orderID]) != nil {
                    try execute("ROLLBACK")
                    return .orderAlreadyFulfilled
                } else {
                    try run(
                        "INSERT INTO grants (transaction_id, order_id, purchase_id, event) VALUES (?1, ?2, ?3, ?4)",
                        [transactionID, orderID, purchaseID], blob: event)
                }
            }
            try run("INSERT INTO results (job_id, event) VALUES (?1, ?2)", [jobID], blob: event)
            try execute("COMMIT")
            return .recorded
        } catch {
            try? execute("ROLLBACK")  // the original error is the one to report
            throw error
        }
    }

    private func execute(_ sql: String) throws {
        guard let db else { throw LedgerError("closed") }
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw LedgerError("sqlite: \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    private func prepare(_ sql: String, _ texts: [String], blob: Data? = nil) throws -> OpaquePointer {
        guard let db else { throw LedgerError("closed") }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw LedgerError("sqlite: \(String(cString: sqlite3_errmsg(db)))")
        }
        for (index, text) in texts.enumerated() {
            sqlite3_bind_text(statement, Int32(index + 1), text, -1, csqlite_transient())
        }
        if let blob {
            _ = blob.withUnsafeBytes {
                sqlite3_bind_blob(
                    statement, Int32(texts.count + 1), $0.baseAddress, Int32($0.count), csqlite_transient())
            }
        }
        return statement
    }

    private func run(_ sql: String, _ texts: [String], blob: Data? = nil) throws {
        let statement = try prepare(sql, texts, blob: blob)
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_DONE else {
            throw LedgerError("sqlite: \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    private func queryText(_ sql: String, _ texts: [String]) throws -> String? {
        let statement = try prepare(sql, texts)
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0) else { return nil }
        return String(cString: text)
    }

    private func queryRows(_ sql: String, _ texts: [String]) throws -> [(String, String)] {
        let statement = try prepare(sql, texts)
        defer { sqlite3_finalize(statement) }
        var rows: [(String, String)] = []
        var step = sqlite3_step(statement)
        while step == SQLITE_ROW {
            let first = sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? ""
            let second = sqlite3_column_text(statement, 1).map { String(cString: $0) } ?? ""
            rows.append((first, second))
            step = sqlite3_step(statement)
        }
        // A read cut short (busy, I/O) must not look like "no grant": that would grant twice.
        guard step == SQLITE_DONE else { throw LedgerError("sqlite: \(String(cString: sqlite3_errmsg(db)))") }
        return rows
    }

    private func queryBlob(_ sql: String, _ texts: [String]) throws -> Data? {
        let statement = try prepare(sql, texts)
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { return nil }
        let count = Int(sqlite3_column_bytes(statement, 0))
        guard let bytes = sqlite3_column_blob(statement, 0) else { return Data() }
        return Data(bytes: bytes, count: count)
    }
}
