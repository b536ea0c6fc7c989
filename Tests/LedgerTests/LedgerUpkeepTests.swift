import CSQLite
import Foundation
@testable import Ledger
import TestSupport
import Testing
import Vocabulary

/// The ledger's upkeep: its own PostgreSQL schema with versioned migrations, a role that may not create
/// anything, and stored results pruned after their retention while grants stay.
@Suite("The ledger's schema, role and retention", .timeLimit(.minutes(2)))
struct LedgerUpkeepTests {
    let event = Data(#"{"decision":"grant","event_id":"e1"}"#.utf8)

    /// Records `old-1`, `old-2` (a grant of transaction 100), `new-1`, `support:7` and `Support:7`, then ages all
    /// but `new-1` by 40 days with `age` (the backend's SQL, given `LIKE` patterns) and adds 25,000 aged results
    /// (more than one pruning chunk).
    private func pruneScenario(_ ledger: any Ledger, age: ([String]) -> Void) async throws {
        #expect(try await ledger.record(jobID: "old-1", claim: .deny, event: event) == .recorded)
        let grant = LedgerClaim.grant(orderID: "order-1", transactionID: "100")
        #expect(try await ledger.record(jobID: "old-2", claim: grant, event: event) == .recorded)
        #expect(try await ledger.record(jobID: "new-1", claim: .deny, event: event) == .recorded)
        // Support's credit is kept for good; a job id that only looks like one (another case) is not.
        #expect(try await ledger.record(jobID: "support:7", claim: .deny, event: event) == .recorded)
        #expect(try await ledger.record(jobID: "Support:7", claim: .deny, event: event) == .recorded)
        age(["old-%", "support:%", "Support:%"])
        let cutoff = Date(timeIntervalSinceNow: -30 * 86_400)
        #expect(try await ledger.pruneResults(decidedBefore: cutoff) == 25_003)
        #expect(try await ledger.storedEvent(jobID: "support:7") == event)
        #expect(try await ledger.storedEvent(jobID: "Support:7") == nil)
        #expect(try await ledger.storedEvent(jobID: "old-1") == nil)
        #expect(try await ledger.storedEvent(jobID: "old-2") == nil)
        #expect(try await ledger.storedEvent(jobID: "new-1") == event)
        // The grant outlives its result: the purchase is still taken for any other order...
        let other = LedgerClaim.grant(orderID: "order-2", transactionID: "100")
        #expect(try await ledger.record(jobID: "later", claim: other, event: event) == .duplicateTransaction)
        // ...and the pruned job, delivered again, meets its own grant: the same grant, recorded again.
        #expect(try await ledger.record(jobID: "old-2", claim: grant, event: event) == .recorded)
        #expect(try await ledger.pruneResults(decidedBefore: cutoff) == 0)
    }

    @Test("SQLite: results past the retention are pruned in chunks, grants stay and still refuse a second order")
    func pruneSQLite() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("prune-\(UUID()).sqlite").path
        let ledger = try await LedgerFactory.open(url: "sqlite:\(path)")
        try await pruneScenario(ledger) { patterns in
            var db: OpaquePointer?
            #expect(sqlite3_open(path, &db) == SQLITE_OK)
            let sql = """
                UPDATE results SET decided_at = '2020-01-01T00:00:00.000Z' WHERE \(patterns.map { "job_id LIKE '\($0)'" }.joined(separator: " OR "));
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 25000)
                    INSERT INTO results (job_id, event, decided_at) SELECT 'bulk-' || i, '{}', '2020-01-01T00:00:00.000Z' FROM n;
                """
            #expect(sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK)
            sqlite3_close(db)
        }
        await ledger.close()
    }

    @Test("PostgreSQL: results past the retention are pruned in chunks, grants stay and still refuse a second order")
    func prunePostgres() async throws {
        let url = try makePostgresDatabase()
        let ledger = try await LedgerFactory.open(url: url, poolSize: 2)
        try await pruneScenario(ledger) { patterns in
            let sql = """
                UPDATE receipt_worker.results SET decided_at = now() - interval '40 days' WHERE \(patterns.map { "job_id LIKE '\($0)'" }.joined(separator: " OR "));
                INSERT INTO receipt_worker.results (job_id, event, decided_at)
                    SELECT 'bulk-' || g, '{}', now() - interval '40 days' FROM generate_series(1, 25000) g;
                """
            #expect(runPsql(url, sql) == 0)
        }
        await ledger.close()
    }

    @Test("the ledger lives in ledger.schema, not in the database's default schema")
    func ownSchema() async throws {
        let url = try makePostgresDatabase()
        let ledger = try await LedgerFactory.open(url: url, poolSize: 2, schema: "games_ledger")
        #expect(
            try await ledger.record(jobID: "j", claim: .grant(orderID: "o", transactionID: "1"), event: event)
                == .recorded)
        await ledger.close()
        #expect(runPsql(url, "SELECT 1 FROM games_ledger.grants WHERE transaction_id = '1'") == 0)
        let latest = PostgresSchema(name: "games_ledger")!.latestVersion
        #expect(
            runPsql(
                url,
                "DO $$ BEGIN IF (SELECT max(version) FROM games_ledger.schema_migrations) <> \(latest) THEN RAISE 'behind'; END IF; END $$"
            ) == 0)
        // Nothing of the ledger's in public, where an application's own tables live.
        #expect(runPsql(url, "SELECT 1 FROM public.grants") != 0)
        #expect(
            runPsql(
                url,
                "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND p.proname LIKE '%record%') THEN RAISE 'found'; END IF; END $$"
            ) == 0)
    }

    @Test(
        "a DBA migrates with the printed script as the schema's owner; the worker's role, granted as printed, records and prunes but cannot create"
    )
    func leastPrivilege() async throws {
        let url = try makePostgresDatabase()
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let owner = "ledger_owner_\(suffix)"
        let app = "ledger_app_\(suffix)"
        #expect(runPsql(url, "CREATE ROLE \(owner) LOGIN; CREATE ROLE \(app) LOGIN") == 0)
        // The owner may not create schemas in the database: a DBA made the schema for it.
        #expect(runPsql(url, "CREATE SCHEMA receipt_worker AUTHORIZATION \(owner)") == 0)
        let ownerURL = url.replacingOccurrences(of: "://postgres@", with: "://\(owner)@")
        let appURL = url.replacingOccurrences(of: "://postgres@", with: "://\(app)@")
        let script = PostgresSchema(name: "receipt_worker")!.script(grantingTo: app)
        #expect(runPsql(ownerURL, script) == 0)
        // Run twice: every statement is idempotent.
        #expect(runPsql(ownerURL, script) == 0)

        let ledger = try await LedgerFactory.open(url: appURL, poolSize: 2)
        let grant = LedgerClaim.grant(orderID: "o", transactionID: "7", purchaseID: .transaction("7"))
        #expect(try await ledger.record(jobID: "j", claim: grant, event: event) == .recorded)
        #expect(try await ledger.record(jobID: "j", claim: grant, event: event) == .replay(event))
        #expect(try await ledger.storedEvent(jobID: "j") == event)
        #expect(try await ledger.pruneResults(decidedBefore: Date(timeIntervalSinceNow: 60)) == 1)
        await ledger.close()
        #expect(runPsql(appURL, "CREATE TABLE receipt_worker.mine (a int)") != 0)
        #expect(runPsql(appURL, "DELETE FROM receipt_worker.grants") != 0)
    }

    @Test("a worker whose role cannot create waits on a schema not yet migrated, and starts once its owner migrates it")
    func unmigratedSchemaWithoutRights() async throws {
        let url = try makePostgresDatabase()
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let app = "ledger_app_\(suffix)"
        let database = String(url[url.index(after: url.lastIndex(of: "/")!)...])
        #expect(runPsql(url, "CREATE ROLE \(app) LOGIN; REVOKE CREATE ON DATABASE \(database) FROM PUBLIC") == 0)
        let appURL = url.replacingOccurrences(of: "://postgres@", with: "://\(app)@")
        func refusals() -> Int {
            Int(psqlValue(url, "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()") ?? "")
                ?? 0
        }
        let before = refusals()
        let opening = Task { try await LedgerFactory.open(url: appURL, poolSize: 2) }
        // Refused ("permission denied": a rolled back migration), and retrying, until the owner migrates.
        #expect(await eventually(timeout: .seconds(30)) { refusals() > before }, "the worker's role was never refused")
        let script = PostgresSchema(name: "receipt_worker")!.script(grantingTo: app)
        #expect(runPsql(url, script) == 0)
        let ledger = try await opening.value
        #expect(try await ledger.record(jobID: "j", claim: .deny, event: event) == .recorded)
        await ledger.close()
    }
}

@Suite("A ledger URL's password never in an error")
struct LedgerSecretTests {
    /// Connects to nothing with each of `urls`: the error names none of `secrets`.
    func expectErrorsHide(_ secrets: [String], connecting urls: [String]) {
        for url in urls {
            do {
                _ = try PostgresConnection(url: url)
                Issue.record("connected to nothing")
            } catch {
                let text = "\(error)"
                for secret in secrets { #expect(!text.contains(secret), "\(text)") }
            }
        }
    }

    @Test("a malformed URL whose password libpq quotes back: the error names no part of the password")
    func passwordRedacted() {
        expectErrorsHide(
            ["s3cr", "ZZet-Value", "plainS3cret"],
            connecting: [
                "postgresql://worker:s3cr%ZZet-Value@127.0.0.1:1/ledger",
                "postgresql://worker:plainS3cret@127.0.0.1:1/x?bad",
            ])
        #expect(
            PostgresConnection.redacting(
                "invalid percent-encoded token: \"s3cr%ZZet\"", of: "postgresql://u:s3cr%ZZet@h/d"
            )
            .contains("s3cr") == false)
    }

    @Test("a password given as a parameter, not in the user information, is kept out of the error too")
    func parameterPasswordRedacted() {
        expectErrorsHide(
            ["Ab%9z", "SecretParam", "9zSecret"],
            connecting: [
                "postgresql://worker@127.0.0.1:1/ledger?password=Ab%9zSecretParam",
                "postgresql://127.0.0.1:1/ledger?sslmode=disable&PASSWORD=Ab%9zSecretParam",
                "postgresql:///ledger?host=127.0.0.1&port=1&sslpassword=Ab%9zSecretParam&x=%zz",
            ])
        #expect(
            PostgresConnection.passwords(in: "host=db user=w password='two words' dbname=l") == ["two words"])
        #expect(PostgresConnection.passwords(in: "postgresql://w:p%40ss@db/l?password=other") == ["p%40ss", "other"])
        #expect(PostgresConnection.passwords(in: "postgresql://w@db/l?passfile=/run/pgpass").isEmpty)
        // A `?` in the user information's password (libpq reads it up to the `@`), an escaped quote in a value.
        #expect(PostgresConnection.passwords(in: "postgresql://w:Ab?c%zz@db/l") == ["Ab?c%zz"])
        #expect(
            PostgresConnection.passwords(in: #"host=db password='it\'s x' user=w"#) == [#"it\'s x"#, "it's x"])
    }
}
