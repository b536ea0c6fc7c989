import Foundation
import Testing

@testable import Ledger

/// A read's statements in one transaction: one snapshot, and the ledger writable after it, however it ended.
@Suite("SQLite's read transactions")
struct SQLiteTransactionTests {
    func withLedgerFile<T>(_ body: (String) throws -> T) throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("reads-\(UUID()).sqlite").path
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        return try body(path)
    }

    func count(_ connection: SQLiteConnection) throws -> Int? {
        try connection.rows("SELECT count(*) FROM t").first?.int(0)
    }

    @Test("a read's statements see one snapshot: a write committed meanwhile is seen by the next read")
    func oneSnapshot() throws {
        try withLedgerFile { path in
            let reader = try SQLiteConnection(path: path)
            try reader.execute("PRAGMA journal_mode = WAL; CREATE TABLE t (v INTEGER)")
            let writer = try SQLiteConnection(path: path)
            let (before, during) = try reader.readTransaction {
                let before = try count(reader)
                _ = try writer.transaction { try writer.rows("INSERT INTO t VALUES (1)") }
                return (before, try count(reader))
            }
            #expect(before == 0)
            #expect(during == 0, "the read's second statement reads the snapshot of its first")
            #expect(try reader.readTransaction { try count(reader) } == 1)
        }
    }

    @Test("a read that fails ends its transaction: the connection writes next, and reads what others wrote")
    func failedReadEnds() throws {
        try withLedgerFile { path in
            let connection = try SQLiteConnection(path: path)
            try connection.execute("PRAGMA journal_mode = WAL; CREATE TABLE t (v INTEGER)")
            // Not `#expect(throws:)`: Swift 6.3.1 gives a closure inside the macro's expansion the same name as the next
            // closure of the same type in this enclosing closure (one `closure #2` in the binary), so `transaction`
            // below would run the expectation's closure, a read, in place of its own.
            do {
                _ = try connection.readTransaction { try connection.rows("SELECT v FROM no_such_table") }
                Issue.record("a read of a table that is not there returned")
            } catch {
                #expect(error is LedgerError)
            }
            // Within a transaction left open, BEGIN IMMEDIATE fails ("cannot start a transaction within a transaction").
            _ = try connection.transaction { try connection.rows("INSERT INTO t VALUES (1)") }
            let other = try SQLiteConnection(path: path)
            _ = try other.transaction { try other.rows("INSERT INTO t VALUES (2)") }
            #expect(try connection.readTransaction { try count(connection) } == 2)
        }
    }
}
