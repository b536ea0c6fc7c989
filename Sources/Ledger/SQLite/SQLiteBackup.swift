import CSQLite
import Foundation

/// `receipt-worker ledger backup`: a consistent copy of a SQLite ledger taken while a worker writes to it,
/// through SQLite's online backup API (sqlite3_backup_*). The copy is taken in one step, one read transaction:
/// in write-ahead-log mode a reader never holds the writer up, and a copy taken in pieces starts again at every
/// write by another connection (SQLite's rule), so under a worker's steady writes it would never end. What the
/// copy holds is the ledger at the moment its step began: a restore from it is a ledger older than its
/// consumer group, which the worker refuses until `ledger rewind-group` (docs/runbook.md, "Restore").
public enum SQLiteBackup {
    /// Every page in one step (-1): see above.
    static let pagesPerStep: Int32 = -1

    /// Copies the ledger at `source` to `destination` (a new file; an existing one is refused). Returns the
    /// copy's size in bytes.
    public static func copy(from source: String, to destination: String) throws -> Int {
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw LedgerError(.misconfigured, "\(destination) exists: a backup is written to a new file")
        }
        guard FileManager.default.fileExists(atPath: source) else {
            throw LedgerError(.misconfigured, "no SQLite ledger at \(source)", key: "ledger.url")
        }
        var from: OpaquePointer?
        var to: OpaquePointer?
        defer {
            sqlite3_close(from)
            sqlite3_close(to)
        }
        guard sqlite3_open_v2(source, &from, SQLITE_OPEN_READONLY, nil) == SQLITE_OK,
            sqlite3_open_v2(destination, &to, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK
        else {
            throw LedgerError(.unavailable, "sqlite backup: \(message(from ?? to))")
        }
        sqlite3_busy_timeout(from, 5_000)
        guard let backup = sqlite3_backup_init(to, "main", from, "main") else {
            throw LedgerError(.unavailable, "sqlite backup: \(message(to))")
        }
        var status: Int32 = SQLITE_OK
        repeat {
            status = sqlite3_backup_step(backup, pagesPerStep)
            if status == SQLITE_BUSY || status == SQLITE_LOCKED { usleep(10_000) }
        } while status == SQLITE_OK || status == SQLITE_BUSY || status == SQLITE_LOCKED
        sqlite3_backup_finish(backup)
        guard status == SQLITE_DONE else {
            try? FileManager.default.removeItem(atPath: destination)
            throw LedgerError(.unavailable, "sqlite backup: \(String(cString: sqlite3_errstr(status)))")
        }
        // The copy stands alone: one file, no -wal beside it.
        guard sqlite3_exec(to, "PRAGMA journal_mode = DELETE", nil, nil, nil) == SQLITE_OK else {
            throw LedgerError(.unavailable, "sqlite backup: \(message(to))")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: destination)[.size] as? Int) ?? nil
        return size ?? 0
    }

    private static func message(_ db: OpaquePointer?) -> String {
        db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
    }
}
