import Foundation
import Observability
import Vocabulary

/// One connection inside a transaction, as the ledger's statements use it: one SQL text for SQLite and
/// PostgreSQL, its parameters written `?1`, `?2`, ..., and the few words the two spell differently taken from
/// ``SQLSpelling``. Each dialect implements it (``SQLiteDialect``, ``PostgresDialect``); the statements are
/// written once (``PurchaseStatements``, ``LedgerQueries``).
protocol SQLSession {
    var spelling: SQLSpelling { get }

    /// Runs a statement; returns its rows (none for a statement that returns none).
    @discardableResult
    func rows(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow]

    /// Serialises one purchase's claim and state changes across writers, for the rest of the transaction:
    /// PostgreSQL's advisory lock of the key; nothing in SQLite, whose write transaction holds the only lock.
    func lock(_ key: String) throws

    /// Takes a lock only one caller at a time holds, for the rest of the transaction, without waiting: false when
    /// another holds it (PostgreSQL's try-lock; always true in SQLite).
    func tryLock(_ key: Int) throws -> Bool

    /// Runs writes that never read what another of them writes (each a different table's rows), in one round trip
    /// where the database can: PostgreSQL runs them as one statement (``PostgresSession``); SQLite, in process, one
    /// after another.
    func run(_ writes: [SQLStatement]) throws
}

/// A statement and its parameters (`?1`, `?2`, ... in `sql`), to be run later: the writes a rule decided.
struct SQLStatement {
    var sql: String
    var parameters: [SQLValue]

    init(_ sql: String, _ parameters: [SQLValue]) {
        self.sql = sql
        self.parameters = parameters
    }
}

extension SQLSession {
    @discardableResult
    func rows(_ sql: String, _ parameters: SQLValue...) throws -> [SQLRow] { try rows(sql, parameters) }

    func first(_ sql: String, _ parameters: [SQLValue]) throws -> SQLRow? { try rows(sql, parameters).first }

    func run(_ writes: [SQLStatement]) throws {
        for write in writes { try rows(write.sql, write.parameters) }
    }
}

/// A parameter. A time is written as each database keeps it (RFC 3339 text in SQLite, `timestamptz` in
/// PostgreSQL): a statement names it with ``SQLSpelling/time(_:)``.
enum SQLValue {
    case text(String)
    case integer(Int64)
    case bool(Bool)
    case time(Date)
    case bytes([UInt8])
    case null

    static func optional(_ text: String?) -> SQLValue { text.map(SQLValue.text) ?? .null }
    static func optional(_ number: Int64?) -> SQLValue { number.map(SQLValue.integer) ?? .null }
    static func optional(_ date: Date?) -> SQLValue { date.map(SQLValue.time) ?? .null }
    static func integer(_ number: Int) -> SQLValue { .integer(Int64(number)) }
}

/// One row of a result, its columns by index, read whatever type the database gave them.
struct SQLRow {
    enum Cell {
        case null
        case text(String)
        case integer(Int64)
        case bytes([UInt8])
    }

    let cells: [Cell]

    func text(_ index: Int) -> String? {
        guard index < cells.count else { return nil }
        switch cells[index] {
        case .null: return nil
        case .text(let text): return text
        case .integer(let number): return String(number)
        case .bytes(let bytes): return String(decoding: bytes, as: UTF8.self)
        }
    }

    func int64(_ index: Int) -> Int64? {
        guard index < cells.count else { return nil }
        switch cells[index] {
        case .integer(let number): return number
        case .text(let text): return Int64(text)
        case .null, .bytes: return nil
        }
    }

    func int(_ index: Int) -> Int? { int64(index).map { Int(clamping: $0) } }

    /// A boolean column, or a condition: SQLite's 0 and 1, PostgreSQL's `t` and `f`.
    func bool(_ index: Int) -> Bool {
        guard index < cells.count else { return false }
        switch cells[index] {
        case .integer(let number): return number != 0
        case .text(let text): return text == "t" || text == "true" || text == "1"
        case .null, .bytes: return false
        }
    }

    /// A time read through ``SQLSpelling/readTime(_:)``: seconds since the epoch (PostgreSQL), or the RFC 3339
    /// text SQLite keeps.
    func time(_ index: Int) -> Date? {
        guard let text = text(index) else { return nil }
        if let seconds = Double(text) { return Date(timeIntervalSince1970: seconds) }
        return RFC3339.parse(text)
    }

    func bytes(_ index: Int) -> [UInt8]? {
        guard index < cells.count else { return nil }
        switch cells[index] {
        case .null: return nil
        case .bytes(let bytes): return bytes
        case .text(let text): return Array(text.utf8)
        case .integer(let number): return Array(String(number).utf8)
        }
    }

    /// A stored event from five columns from `index`: `event_id, event_type, event_time, event_key, event`.
    func event(from index: Int = 0) -> StoredEvent {
        StoredEvent(
            eventID: text(index) ?? "", type: text(index + 1) ?? "", time: text(index + 2) ?? "",
            key: text(index + 3) ?? "", json: bytes(index + 4) ?? [])
    }
}

/// The words SQLite and PostgreSQL spell differently in the ledger's statements, one set per dialect.
struct SQLSpelling: Sendable {
    /// `receipt_worker.` (the PostgreSQL schema, `ledger.schema`), or nothing.
    let schemaPrefix: String
    /// Parameter `n` as a time: `?n` (RFC 3339 text), or `to_timestamp(?n::double precision)`.
    let time: @Sendable (Int) -> String
    /// A time column as ``SQLRow/time(_:)`` reads it.
    let readTime: @Sendable (String) -> String
    /// The time now, as the ledger keeps its times.
    let now: String
    /// After a `SELECT` in a write transaction: lock the rows read (PostgreSQL's `FOR UPDATE`).
    let forUpdate: String
    /// Lock the rows read, skipping those another transaction holds (PostgreSQL's `FOR UPDATE SKIP LOCKED`).
    let forUpdateSkipLocked: String
    /// A row's physical id: `rowid`, `ctid`.
    let rowID: String
    /// A string member of a stored event's JSON (a `text` or `blob` column).
    let eventMember: @Sendable (_ column: String, _ member: String) -> String

    /// A table of the ledger, with its schema.
    func table(_ name: String) -> String { schemaPrefix + name }
}
