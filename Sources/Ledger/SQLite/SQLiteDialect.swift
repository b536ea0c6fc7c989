import Foundation
import Observability
import Synchronization
import Vocabulary

/// The ledger in one SQLite file, for a single host (`sqlite::memory:`: in memory, for tests). Every statement
/// runs on one thread of its own, in order (SQLite has one writer at a time anyway), off Swift's cooperative pool;
/// WAL keeps readers out of the writer's way.
final class SQLiteDialect: LedgerDialect, Sendable {
    private let thread = BlockingThread(name: "ledger-sqlite")
    /// Only ever taken on `thread`, so never waited for: the lock is there for the compiler, which then sees that
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
        try connection.execute("PRAGMA busy_timeout = 5000;")
        // Switching a new file to WAL takes the file's lock without waiting (SQLite asks no busy handler there):
        // another process opening the same file at that moment (a worker and a command started together) makes
        // it busy. Asked again for up to 5 s, as the busy timeout waits elsewhere.
        var attempts = 0
        while true {
            do {
                try connection.execute("PRAGMA journal_mode = WAL;")
                break
            } catch let error as LedgerError where error.code == .unavailable && attempts < 250 {
                attempts += 1
                usleep(20_000)
            }
        }
        try connection.execute("PRAGMA synchronous = NORMAL;")
        try SQLiteSchema.migrate(connection)
        try LedgerQueries.checkDefaultApp(defaultBundleID, in: SQLiteSession(connection: connection))
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
    /// A millisecond: at thousands of jobs a second the writer is idle between commits most of the time, so without
    /// a wait each commit held a job or two, and its WAL frames and checkpoints (whole pages, a few a commit) were
    /// a tenth of a job's CPU. A job's wait for Apple is a hundred times longer.
    var recordGathering: Duration { .milliseconds(1) }
    var poolStats: LedgerPoolStats? { nil }

    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await onQueue { connection in
            try self.checkFile()
            return try connection.transaction { try body(SQLiteSession(connection: connection)) }
        }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await onQueue { connection in
            try connection.readTransaction { try body(SQLiteSession(connection: connection)) }
        }
    }

    private func onQueue<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await thread.perform { try self.connection.withLock { connection in try body(connection) } }
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
        _ = try? await thread.perform { self.connection.withLock { $0.close() } }
        thread.stop()
    }

    deinit { thread.stop() }

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

/// A statement of the ledger's on SQLite, each prepared once (``SQLiteConnection``).
struct SQLiteSession: SQLSession {
    let connection: SQLiteConnection
    var spelling: SQLSpelling { SQLiteDialect.spelling }

    func rows(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow] { try connection.rows(sql, parameters) }

    func lock(_ key: String) throws {}  // BEGIN IMMEDIATE holds the only write lock

    func tryLock(_ key: Int) throws -> Bool { true }
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
