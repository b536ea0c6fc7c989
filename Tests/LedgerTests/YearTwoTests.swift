import CSQLite
import Foundation
import TestSupport
import Testing
import Vocabulary

@testable import Ledger

/// Migration 10 (a ledger for its second year) on both ledgers, from the schema before it with rows in it, and
/// the retention it makes room for: every row kept, the event stored once, a key on every table, and what
/// outlived its retention pruned while what must stay stays.
@Suite("A ledger for year two: migration 10 and retention", .timeLimit(.minutes(2)))
struct YearTwoTests {
    static let event = Data(#"{"decision":"grant","event_id":"e"}"#.utf8)

    @Test(
        "PostgreSQL at migration 9 with grants and results moves to the latest: rows kept, events once, primary keys, one transaction index, nothing only releases before 1.0.0 called"
    )
    func postgresMigration() async throws {
        let url = try makePostgresDatabase()
        let schema = try #require(PostgresSchema(name: "receipt_worker", defaultBundleID: "com.example"))
        let version9 =
            (["BEGIN"] + schema.bootstrap
            + schema.migrations.prefix(9).flatMap { $0.statements + [schema.record($0)] } + ["COMMIT"])
            .map { $0 + ";" }.joined(separator: "\n")
        #expect(runPsql(url, version9) == 0)
        // As 0.3.0 wrote them: each grant keeps a copy of its result's event.
        #expect(
            runPsql(
                url,
                """
                INSERT INTO receipt_worker.grants (app, environment, transaction_id, order_id, purchase_id, user_id,
                    product_id, quantity, event)
                    SELECT '', 'Production', (1000 + i)::text, 'order-' || i, (1000 + i)::text, 'u', 'coins', 1,
                        '{"event_id":"e' || i || '"}' FROM generate_series(0, 49) AS i;
                INSERT INTO receipt_worker.results (app, job_id, fingerprint, event, event_id, event_type, event_time,
                    event_key)
                    SELECT '', 'job-' || i, 'f', '{"event_id":"e' || i || '"}', 'e' || i, 'receipt.granted',
                        '2026-12-01T00:00:00.000Z', 'order-' || i FROM generate_series(0, 49) AS i;
                """) == 0)
        let ledger = try await LedgerFactory.open(url: url, poolSize: 2, defaultBundleID: "com.example")
        func count(_ sql: String) -> Int32 {
            // psql's exit status says whether the assertion in SQL holds (a division by zero otherwise).
            runPsql(url, "SELECT 1 / (CASE WHEN \(sql) THEN 1 ELSE 0 END)")
        }
        #expect(count("(SELECT count(*) FROM receipt_worker.grants) = 50") == 0, "every grant kept")
        #expect(count("(SELECT count(*) FROM receipt_worker.results) = 50") == 0, "every result kept")
        #expect(count("NOT EXISTS (SELECT 1 FROM receipt_worker.grants WHERE event IS NOT NULL)") == 0, "events once")
        for table in ["grants", "results", "purchase_states", "consumption_requests", "notifications"] {
            #expect(
                count(
                    "EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'receipt_worker.\(table)'::regclass AND contype = 'p')"
                ) == 0, "\(table) has a primary key")
        }
        #expect(count("to_regclass('receipt_worker.grants_transaction') IS NOT NULL") == 0)
        #expect(count("to_regclass('receipt_worker.grants_transaction_id') IS NULL") == 0)
        #expect(count("to_regclass('receipt_worker.grants_app_transaction') IS NULL") == 0)
        #expect(count("NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'results_event_columns')") == 0)
        #expect(count("(SELECT max(version) FROM receipt_worker.schema_migrations) = \(schema.latestVersion)") == 0)
        // The claim still meets the old grants; what only releases before 1.0.0 called is gone (migration 16).
        let old = LedgerClaim.grant(orderID: "thief", transactionID: "1007")
        #expect(try await ledger.record(jobID: "new", claim: old, event: Self.event) == .duplicateTransaction)
        #expect(count("to_regproc('receipt_worker.record_batch_v3') IS NULL") == 0)
        #expect(count("to_regproc('receipt_worker.record_v3') IS NULL") == 0)
        #expect(count("to_regproc('receipt_worker.claim_facts') IS NULL") == 0)
        #expect(count("to_regproc('receipt_worker.claim_write_v2') IS NOT NULL") == 0, "1.0.0's claim stays")
        #expect(count("to_regproc('receipt_worker.stored_results') IS NOT NULL") == 0, "1.0.0's read stays")
        #expect(count("NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'grants_fill_columns')") == 0)
        #expect(count("to_regproc('receipt_worker.fill_purchase_id') IS NULL") == 0)
        #expect(count("to_regproc('receipt_worker.fill_grant_columns') IS NULL") == 0)
        await ledger.close()
    }

    @Test("SQLite at version 6 moves to 10: rows kept, events once, no compatibility trigger")
    func sqliteMigration() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("v6-\(UUID()).sqlite").path
        let first = try await LedgerFactory.open(url: "sqlite:\(path)", defaultBundleID: "com.example")
        for index in 0..<20 {
            _ = try await first.record(
                jobID: "j\(index)", claim: .grant(orderID: "o\(index)", transactionID: "\(500 + index)"),
                event: Self.event)
        }
        await first.close()
        var db: OpaquePointer?
        #expect(sqlite3_open(path, &db) == SQLITE_OK)
        // Back to version 6: the grants' copy of their events, the triggers.
        #expect(
            sqlite3_exec(
                db,
                """
                UPDATE grants SET event = X'7B7D';
                CREATE TRIGGER results_event_columns AFTER INSERT ON results WHEN NEW.event_id IS NULL
                    BEGIN SELECT 1; END;
                DROP INDEX notifications_handled_at;
                PRAGMA user_version = 6;
                """, nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        let ledger = try await LedgerFactory.open(url: "sqlite:\(path)", defaultBundleID: "com.example")
        #expect(
            try await ledger.record(
                jobID: "new", claim: .grant(orderID: "thief", transactionID: "507"), event: Self.event)
                == .duplicateTransaction)
        await ledger.close()
        #expect(sqlite3_open(path, &db) == SQLITE_OK)
        defer { sqlite3_close(db) }
        func value(_ sql: String) -> Int64 {
            var statement: OpaquePointer?
            sqlite3_prepare_v2(db, sql, -1, &statement, nil)
            defer { sqlite3_finalize(statement) }
            return sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : -1
        }
        #expect(value("PRAGMA user_version") == Int64(SQLiteSchema.version))
        #expect(value("SELECT count(*) FROM grants") == 20)
        #expect(value("SELECT count(*) FROM grants WHERE event IS NOT NULL") == 0)
        #expect(value("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'") == 0)
        #expect(value("SELECT count(*) FROM sqlite_master WHERE name = 'notifications_handled_at'") == 1)
    }

    @Test(
        "retention prunes handled notifications and what is settled, in batches; a waiting purchase, a refund and every grant stay",
        arguments: Backend.allCases)
    func retention(backend: Backend) async throws {
        let ledger = try await backend.open()
        let at = Date(timeIntervalSinceNow: -86_400)
        func notify(_ id: String, _ kind: NotificationChange.Kind) async throws {
            _ = try await ledger.apply(
                NotificationChange(id: id, app: .defaultApp, environment: .production, kind: kind)
            ) { holder in
                StoredEvent(eventID: id, type: "t", time: "", key: holder.grant.orderID, json: Array("{}".utf8))
            }
        }
        func reported(_ id: String, due: Date) -> NotificationChange.Kind {
            .purchased(
                ReportedPurchase(
                    purchaseID: .transaction(id), transactionID: id, originalTransactionID: id, productID: "gems",
                    quantity: 1,
                    dueAt: due,
                    event: StoredEvent(
                        eventID: "credit-\(id)", type: "receipt.unclaimed", time: "", key: "unclaimed:\(id)",
                        json: Array("{}".utf8))))
        }
        _ = try await ledger.record(jobID: "j1", claim: .grant(orderID: "o1", transactionID: "10"), event: Self.event)
        _ = try await ledger.record(jobID: "j2", claim: .grant(orderID: "o2", transactionID: "11"), event: Self.event)
        try await notify("c1", .consumptionRequest(transactionID: "10", respondBy: at))
        // A refund reversed (its state prunable), a refund of a purchase never granted (kept for good).
        try await notify("r1", .revoke(purchaseID: .transaction("11"), transactionID: "11", at: at))
        try await notify(
            "r2", .reinstate(purchaseID: .transaction("11"), transactionID: "11", at: at.addingTimeInterval(1)))
        try await notify("r3", .revoke(purchaseID: .transaction("12"), transactionID: "12", at: at))
        // Reported purchases: one credited and published, one still waiting.
        try await notify("p1", reported("20", due: at))
        try await notify("p2", reported("21", due: Date(timeIntervalSinceNow: 86_400)))
        let credits = try await ledger.creditUnclaimed(now: Date(), limit: 10)
        try await ledger.markCreditsPublished(eventIDs: credits.map(\.eventID))
        let later = Date(timeIntervalSinceNow: 3_600)
        let deleted = try await ledger.prune(Retention(notificationsBefore: later, settledBefore: later))
        #expect(deleted[.notifications] == 6)
        #expect(deleted[.consumptionRequests] == 1)
        #expect(deleted[.unclaimedPurchases] == 1, "the credited one; the waiting one stays")
        #expect(deleted[.purchaseStates] == 1, "the reinstated one; the refund stays")
        #expect(try await ledger.waitingUnclaimed() == 1)
        // What must stay stays: the refund still denies, grants still claim.
        #expect(
            try await ledger.record(jobID: "j3", claim: .grant(orderID: "o3", transactionID: "12"), event: Self.event)
                == .revoked)
        #expect(
            try await ledger.record(jobID: "j4", claim: .grant(orderID: "o4", transactionID: "10"), event: Self.event)
                == .duplicateTransaction)
        #expect(
            try await ledger.record(jobID: "j5", claim: .grant(orderID: "o5", transactionID: "20"), event: Self.event)
                == .duplicateTransaction, "the credit holds its purchase")
        // Nothing left to prune: a second pass deletes nothing.
        let again = try await ledger.prune(Retention(notificationsBefore: later, settledBefore: later))
        #expect(again.values.allSatisfy { $0 == 0 })
        await ledger.close()
    }
}
