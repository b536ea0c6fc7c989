import CSQLite
import Foundation
import TestSupport
import Testing

@testable import Ledger

/// A new ledger is made as 1.0.0 left one (its migrations all recorded, so 1.0.0 runs beside it), and a ledger
/// of a release before 1.0.0 is refused, untouched, with what to do: 1.0.0 migrates it first.
@Suite("Ledgers of releases before 1.0.0", .timeLimit(.minutes(1)))
struct LedgerBeforeOneTests {
    static func refusal(_ open: () async throws -> Void) async -> LedgerError? {
        await #expect(throws: LedgerError.self) { try await open() }
    }

    @Test("a SQLite file of a release before 1.0.0 is refused, its rows and version untouched", arguments: [0, 6, 10])
    func sqliteBeforeOne(version: Int) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("old-\(UUID()).sqlite").path
        var db: OpaquePointer?
        #expect(sqlite3_open(path, &db) == SQLITE_OK)
        let old = """
            CREATE TABLE grants (transaction_id TEXT PRIMARY KEY, order_id TEXT NOT NULL UNIQUE);
            INSERT INTO grants VALUES ('100', 'old-order');
            PRAGMA user_version = \(version);
            """
        #expect(sqlite3_exec(db, old, nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        let error = await Self.refusal { _ = try await LedgerFactory.open(url: "sqlite:\(path)") }
        #expect(error?.code == .migrationFailed)
        #expect(error?.reason.contains("file version \(version)") == true)
        #expect(error?.reason.contains("migrate it with receipt-worker 1.0.0 first") == true)
        #expect(sqlite3_open(path, &db) == SQLITE_OK)
        defer { sqlite3_close(db) }
        func value(_ sql: String) -> Int64 {
            var statement: OpaquePointer?
            sqlite3_prepare_v2(db, sql, -1, &statement, nil)
            defer { sqlite3_finalize(statement) }
            return sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : -1
        }
        #expect(value("PRAGMA user_version") == Int64(version))
        #expect(value("SELECT count(*) FROM grants") == 1)
        #expect(value("SELECT count(*) FROM sqlite_master WHERE name = 'results'") == 0)
    }

    @Test("a PostgreSQL schema at a migration before 1.0.0's is refused by the worker and by the printed script")
    func postgresBeforeOne() async throws {
        let url = try makePostgresDatabase()
        let nine = (1...9).map { "(\($0), 'm\($0)')" }.joined(separator: ", ")
        #expect(
            runPsql(
                url,
                """
                CREATE SCHEMA receipt_worker;
                CREATE TABLE receipt_worker.schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL);
                INSERT INTO receipt_worker.schema_migrations VALUES \(nine);
                CREATE TABLE receipt_worker.grants (transaction_id TEXT PRIMARY KEY, order_id TEXT NOT NULL);
                INSERT INTO receipt_worker.grants VALUES ('100', 'old-order');
                """) == 0)
        let error = await Self.refusal { _ = try await LedgerFactory.open(url: url, poolSize: 1) }
        #expect(error?.code == .migrationFailed)
        #expect(error?.reason.contains("schema receipt_worker at migration 9") == true)
        let script = try #require(PostgresSchema(name: "receipt_worker")).script()
        #expect(runPsql(url, script) != 0)
        #expect(psqlValue(url, "SELECT max(version) FROM receipt_worker.schema_migrations") == "9")
        #expect(psqlValue(url, "SELECT order_id FROM receipt_worker.grants") == "old-order")
        #expect(psqlValue(url, "SELECT to_regclass('receipt_worker.results') IS NULL") == "t")
    }

    @Test("the tables of a release up to 0.3 in the default schema are refused; no schema of the ledger is made")
    func postgresZeroThree() async throws {
        let url = try makePostgresDatabase()
        #expect(
            runPsql(
                url,
                """
                CREATE TABLE grants (transaction_id TEXT PRIMARY KEY, order_id TEXT NOT NULL UNIQUE);
                CREATE TABLE results (job_id TEXT PRIMARY KEY, event TEXT NOT NULL);
                INSERT INTO grants VALUES ('100', 'old-order');
                """) == 0)
        let error = await Self.refusal { _ = try await LedgerFactory.open(url: url, poolSize: 1) }
        #expect(error?.reason.contains("a ledger's tables, and no migration recorded") == true)
        #expect(psqlValue(url, "SELECT to_regnamespace('receipt_worker') IS NULL") == "t")
        #expect(psqlValue(url, "SELECT order_id FROM public.grants") == "old-order")
    }

    @Test("a new PostgreSQL ledger records every migration up to 1.0.0's, as a ledger 1.0.0 migrated does")
    func postgresNewRecordsAll() async throws {
        let url = try makePostgresDatabase()
        await (try LedgerFactory.open(url: url, poolSize: 1)).close()
        let versions = psqlLines(url, "SELECT version FROM receipt_worker.schema_migrations ORDER BY 1")
        #expect(versions == (1...LedgerMigrations.latest).map(String.init))
    }

    @Test("a ledger's tables in its schema with no migration recorded are refused, not made again beside them")
    func postgresUnversioned() async throws {
        let url = try makePostgresDatabase()
        #expect(
            runPsql(
                url,
                """
                CREATE SCHEMA receipt_worker;
                CREATE TABLE receipt_worker.grants (transaction_id TEXT PRIMARY KEY, order_id TEXT NOT NULL);
                INSERT INTO receipt_worker.grants VALUES ('100', 'old-order');
                """) == 0)
        let error = await Self.refusal { _ = try await LedgerFactory.open(url: url, poolSize: 1) }
        #expect(error?.code == .migrationFailed)
        #expect(runPsql(url, try #require(PostgresSchema(name: "receipt_worker")).script()) != 0)
        #expect(psqlValue(url, "SELECT count(*) FROM receipt_worker.schema_migrations") == "0")
        #expect(psqlValue(url, "SELECT order_id FROM receipt_worker.grants") == "old-order")
    }
}
