import CSQLite
import Foundation

/// One SQLite connection and its prepared statements, each prepared once and reused: preparing a statement
/// cost more than running it on every decision.
///
/// Used by one thread at a time (the ledger's queue); not Sendable on its own.
final class SQLiteConnection {
    /// A parameter: text, an integer, a blob, or NULL.
    enum Value {
        case text(String)
        case integer(Int)
        case blob([UInt8])
        case null
    }

    private var db: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]

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
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")  // the original error is the one to report
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

    /// Runs a query; `read` is called on each row. A read cut short (busy, I/O) throws: it must never look like
    /// "no row", which would grant twice.
    func query(_ sql: String, _ values: [Value] = [], _ read: (Row) throws -> Void) throws {
        let statement = try prepared(sql, values)
        defer { sqlite3_reset(statement) }
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW: try read(Row(statement: statement))
            case SQLITE_DONE: return
            default: throw error()
            }
        }
    }

    /// The first row of a query, read by `read`; nil when there is none.
    func first<T>(_ sql: String, _ values: [Value] = [], _ read: (Row) throws -> T) throws -> T? {
        var result: T?
        try query(sql, values) { row in if result == nil { result = try read(row) } }
        return result
    }

    /// One row of a query result; columns by index.
    struct Row {
        let statement: OpaquePointer

        func text(_ column: Int32) -> String? {
            sqlite3_column_text(statement, column).map { String(cString: $0) }
        }

        func integer(_ column: Int32) -> Int? {
            sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : Int(sqlite3_column_int64(statement, column))
        }

        /// Every column, as the ledger's engine reads rows (``SQLRow``).
        var cells: SQLRow {
            SQLRow(
                cells: (0..<sqlite3_column_count(statement)).map { column in
                    switch sqlite3_column_type(statement, column) {
                    case SQLITE_NULL: .null
                    case SQLITE_INTEGER: .integer(sqlite3_column_int64(statement, column))
                    case SQLITE_BLOB: .bytes(bytes(column) ?? [])
                    default: .text(text(column) ?? "")
                    }
                })
        }

        func bytes(_ column: Int32) -> [UInt8]? {
            guard sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
            let count = Int(sqlite3_column_bytes(statement, column))
            guard let pointer = sqlite3_column_blob(statement, column) else { return [] }
            return Array(UnsafeRawBufferPointer(start: pointer, count: count))
        }
    }

    private func prepared(_ sql: String, _ values: [Value]) throws -> OpaquePointer {
        guard let db else { throw LedgerError(.closed, "closed") }
        let statement: OpaquePointer
        if let cached = statements[sql] {
            statement = cached
        } else {
            var made: OpaquePointer?
            guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &made, nil) == SQLITE_OK,
                let made
            else { throw error() }
            statements[sql] = made
            statement = made
        }
        sqlite3_clear_bindings(statement)
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .text(let text): sqlite3_bind_text(statement, position, text, -1, csqlite_transient())
            case .integer(let number): sqlite3_bind_int64(statement, position, sqlite3_int64(number))
            case .blob(let bytes):
                _ = bytes.withUnsafeBytes {
                    sqlite3_bind_blob(
                        statement, position, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count),
                        csqlite_transient())
                }
            case .null: sqlite3_bind_null(statement, position)
            }
        }
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
