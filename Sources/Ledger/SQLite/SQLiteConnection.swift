import CSQLite
import Foundation
import Observability
import Vocabulary

/// One SQLite connection and its prepared statements, each prepared once and reused: preparing a statement
/// cost more than running it on every decision.
///
/// Used by one thread at a time (the ledger's queue); not Sendable on its own.
final class SQLiteConnection {
    private var db: OpaquePointer?
    private var statements: [StatementText: OpaquePointer] = [:]
    private let parameters = SQLiteParameters()

    /// Set once, before the process's first connection: SQLite reads its configuration at initialization.
    private static let configured: Void = { _ = csqlite_disable_memory_statistics() }()

    init(path: String) throws {
        Self.configured
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(handle)
            throw LedgerError(.unavailable, "sqlite \(path): \(message)")
        }
        db = handle
    }

    deinit { close() }

    /// Runs `body` in one write transaction (`BEGIN IMMEDIATE`: the write lock taken at once, so two writers never
    /// both read and then fail to write), committed when it returns, rolled back when it throws.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try within("BEGIN IMMEDIATE", body)
    }

    /// Runs `body` in one read transaction: its statements read one snapshot of the ledger, and the locks a read
    /// takes (the file's shared lock and a read mark in the write-ahead log's index, each a system call to take and
    /// one to drop) are taken once for all of them instead of around each statement.
    func readTransaction<T>(_ body: () throws -> T) throws -> T {
        try within("BEGIN", body)
    }

    /// `body` between `begin` and `COMMIT`, rolled back when it throws. The three statements are prepared once,
    /// like the others (`sqlite3_exec` would parse them again at every transaction).
    private func within<T>(_ begin: String, _ body: () throws -> T) throws -> T {
        // A transaction a failed ROLLBACK left open would refuse every BEGIN from then on (and keep the write-ahead
        // log from being reset): ended first.
        if let db, sqlite3_get_autocommit(db) == 0 { _ = try? rows("ROLLBACK") }
        try rows(begin)
        do {
            let result = try body()
            try rows("COMMIT")
            return result
        } catch {
            _ = try? rows("ROLLBACK")  // the original error is the one to report
            throw error
        }
    }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        sqlite3_close(db)
        db = nil
    }

    /// Runs one or more statements without parameters (schema, transaction control).
    func execute(_ sql: String) throws {
        guard let db else { throw LedgerError(.closed, "closed") }
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw error() }
    }

    /// Runs a statement; returns its rows. A read cut short (busy, I/O) throws: it must never look like "no row",
    /// which would grant twice.
    @discardableResult
    func rows(_ sql: String, _ values: [SQLValue] = []) throws -> [SQLRow] {
        let statement = try prepared(sql, values)
        defer {
            // Cleared as well as reset: the parameters' bytes are the connection's buffer, rewritten by the next run.
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        var rows: [SQLRow] = []
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW: rows.append(Self.row(statement))
            case SQLITE_DONE: return rows
            default: throw error()
            }
        }
    }

    private static func row(_ statement: OpaquePointer) -> SQLRow {
        SQLRow(
            cells: (0..<sqlite3_column_count(statement)).map { column in
                switch sqlite3_column_type(statement, column) {
                case SQLITE_NULL: .null
                case SQLITE_INTEGER: .integer(sqlite3_column_int64(statement, column))
                case SQLITE_BLOB:
                    .bytes(
                        sqlite3_column_blob(statement, column).map {
                            Array(
                                UnsafeRawBufferPointer(start: $0, count: Int(sqlite3_column_bytes(statement, column))))
                        } ?? [])
                default: .text(sqlite3_column_text(statement, column).map { String(cString: $0) } ?? "")
                }
            })
    }

    /// The statement of `sql` (prepared once), with `values` bound.
    private func prepared(_ sql: String, _ values: [SQLValue]) throws -> OpaquePointer {
        guard let db else { throw LedgerError(.closed, "closed") }
        let statement: OpaquePointer
        if let cached = statements[StatementText(sql)] {
            statement = cached
        } else {
            var made: OpaquePointer?
            guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &made, nil) == SQLITE_OK,
                let made
            else { throw error() }
            statements[StatementText(sql)] = made
            statement = made
        }
        parameters.bind(values, to: statement)
        return statement
    }

    private func error() -> LedgerError {
        let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "closed"
        // A constraint or a value SQLite refuses fails the same way forever; the rest (busy, I/O, full) can heal.
        let code = db.map { sqlite3_extended_errcode($0) & 0xFF } ?? SQLITE_MISUSE
        let permanent = code == SQLITE_TOOBIG || code == SQLITE_MISMATCH
        return LedgerError(permanent ? .valueRefused : .unavailable, "sqlite: \(message)")
    }
}

/// A statement's SQL as the cache's key, hashed by its length and its ends only: a job's statements are hundreds of
/// bytes, and hashing all of them at every call (SipHash) was most of a cached statement's lookup. Equality still
/// compares the whole text (at once when both share their storage, as the statements spelled once do).
private struct StatementText: Hashable {
    let sql: String

    init(_ sql: String) { self.sql = sql }

    func hash(into hasher: inout Hasher) {
        var text = sql  // contiguous already: read in place
        text.withUTF8 { utf8 in
            hasher.combine(utf8.count)
            let bytes = UnsafeRawBufferPointer(utf8)
            hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes.prefix(48)))
            hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes.suffix(48)))
        }
    }
}
