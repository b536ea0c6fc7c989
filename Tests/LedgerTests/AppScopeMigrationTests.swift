import CSQLite
import Foundation
import TestSupport
import Testing

@testable import Ledger

/// A ledger written by the release before keys were scoped by app, which already served two games: the
/// default app (`com.example.game`) and another (`com.example.b`), whose every event names its `bundle_id`.
/// After the migration each row is its own app's: nothing granted before is granted again, a refund request
/// stays with its app, and one game's old results answer none of the other's jobs.
@Suite("Ledgers of the release before apps were scoped", .timeLimit(.minutes(1)))
struct AppScopeMigrationTests {
    static let defaultBundle = "com.example.game"
    static let other = AppScope("com.example.b")

    static func event(bundle: String, order: String, transaction: String) -> String {
        #"{"event_id":"old-\#(order)","type":"receipt.granted","decision":"grant","order_id":"\#(order)","#
            + #""user_id":"u","product_id":"coins","quantity":1,"transaction_id":"\#(transaction)","#
            + #""environment":"Production","verified_at":"2026-11-01T00:00:00.000Z","bundle_id":"\#(bundle)"}"#
    }

    /// The rows, as `(table, columns, values)` in SQL both databases read: a default-app grant and result,
    /// the other app's grant and result and its refund request, a grant from before events were kept, and a
    /// result whose event is not JSON.
    static let rows = [
        "INSERT INTO grants (transaction_id, order_id, purchase_id, event) VALUES ('1000', 'o-1', '1000', '\(event(bundle: defaultBundle, order: "o-1", transaction: "1000"))')",
        "INSERT INTO grants (transaction_id, order_id, purchase_id, event) VALUES ('2000', 'b-7', '2000', '\(event(bundle: other.rawValue, order: "b-7", transaction: "2000"))')",
        "INSERT INTO grants (transaction_id, order_id, purchase_id) VALUES ('500', 'o-0', '500')",
        "INSERT INTO results (job_id, event) VALUES ('j-1', '\(event(bundle: defaultBundle, order: "o-1", transaction: "1000"))')",
        "INSERT INTO results (job_id, event) VALUES ('j-2', '\(event(bundle: other.rawValue, order: "b-7", transaction: "2000"))')",
        "INSERT INTO results (job_id, event) VALUES ('j-3', 'not json')",
        "INSERT INTO consumption_requests (transaction_id, notification_id, respond_by) VALUES ('2000', 'n-1', '2999-01-01T00:00:00.000Z')",
        // A refund that came before its grant: which app's, nobody can tell now.
        "INSERT INTO purchase_states (purchase_id, transaction_id, revoked, changed_at) VALUES ('3000', '3000', '1', '2026-11-01T00:00:00Z')",
    ]

    /// What a user of either game would notice, on the migrated ledger.
    func expectEachRowItsApp(_ ledger: any Ledger) async throws {
        let event = Data(#"{"decision":"grant"}"#.utf8)
        // The other game's purchase, granted before the upgrade, under another order: a replay, refused.
        let replay = LedgerClaim.grant(orderID: "b-8", transactionID: "2000")
        #expect(
            try await ledger.record(jobID: "new-1", claim: replay, event: event, app: Self.other)
                == .duplicateTransaction)
        // Its own order again (a client retry with a new job id): the grant it has, not a second one.
        let again = LedgerClaim.grant(orderID: "b-7", transactionID: "2000")
        #expect(try await ledger.record(jobID: "new-2", claim: again, event: event, app: Self.other) == .recorded)
        let other = try #require(try await ledger.grant(transactionID: "2000", app: nil))
        #expect(other.app == Self.other && other.orderID == "b-7")
        #expect(other.consumptionRespondBy != nil, "the refund request stayed with its purchase")
        // The default game's purchases, the one from before events were kept included.
        for transaction in ["1000", "500"] {
            let claim = LedgerClaim.grant(orderID: "o-9", transactionID: transaction)
            #expect(
                try await ledger.record(jobID: "new-\(transaction)", claim: claim, event: event)
                    == .duplicateTransaction)
            #expect(try await ledger.grant(transactionID: transaction, app: .defaultApp) != nil)
        }
        // The refund remembered before any grant holds for every app and environment.
        for app in [AppScope.defaultApp, Self.other] {
            let refunded = LedgerClaim.grant(orderID: "r-\(app.rawValue)", transactionID: "3000")
            #expect(
                try await ledger.record(jobID: "r-\(app.rawValue)", claim: refunded, event: event, app: app) == .revoked
            )
        }
        // Old results answer their own game's job ids only.
        #expect(try await ledger.storedEvent(jobID: "j-1", fingerprint: "any") != nil)
        #expect(try await ledger.storedEvent(jobID: "j-2", fingerprint: "any") == nil)
        #expect(try await ledger.storedEvent(jobID: "j-2", app: Self.other, fingerprint: "any") != nil)
        #expect(try await ledger.storedEvent(jobID: "j-3", fingerprint: "any") == Data("not json".utf8))
    }

    @Test(
        "SQLite: version 2 to 3 gives each row its app; without the default app's bundle id it refuses, naming the key")
    func sqlite() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("v2-\(UUID()).sqlite").path
        var db: OpaquePointer?
        #expect(sqlite3_open(path, &db) == SQLITE_OK)
        let version2 = """
            CREATE TABLE grants (transaction_id TEXT PRIMARY KEY, order_id TEXT NOT NULL UNIQUE,
                granted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), purchase_id TEXT,
                event BLOB, revoked_at TEXT);
            CREATE UNIQUE INDEX grants_purchase_id ON grants (purchase_id);
            CREATE TABLE results (job_id TEXT PRIMARY KEY, event BLOB NOT NULL,
                decided_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
            CREATE TABLE notifications (notification_id TEXT PRIMARY KEY, event BLOB,
                handled_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
            CREATE TABLE purchase_states (purchase_id TEXT PRIMARY KEY, transaction_id TEXT NOT NULL,
                revoked INTEGER NOT NULL, changed_at TEXT NOT NULL);
            CREATE TABLE consumption_requests (transaction_id TEXT PRIMARY KEY, notification_id TEXT NOT NULL,
                respond_by TEXT NOT NULL,
                requested_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), answered_at TEXT);
            PRAGMA user_version = 2;
            """
        #expect(sqlite3_exec(db, version2 + Self.rows.joined(separator: ";\n") + ";", nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        let refused = await #expect(throws: LedgerError.self) { try await LedgerFactory.open(url: "sqlite:\(path)") }
        #expect(refused?.key == "apple.bundle_id")
        let ledger = try await LedgerFactory.open(url: "sqlite:\(path)", defaultBundleID: Self.defaultBundle)
        try await expectEachRowItsApp(ledger)
        // It held decisions before it recorded offsets: it trusts the group's commits until it records its own.
        #expect(try await ledger.recordedOffsets(group: "receipt-worker").startedEmpty == false)
        await ledger.close()
        // The file remembers its default app: opened for another, it refuses, naming the key.
        let other = await #expect(throws: LedgerError.self) {
            try await LedgerFactory.open(url: "sqlite:\(path)", defaultBundleID: "com.example.typo")
        }
        #expect(other?.key == "apple.bundle_id" && other?.reason.contains(Self.defaultBundle) == true)
    }

    @Test(
        "PostgreSQL: migration 6 gives each row its app; without the default app's bundle id it refuses, naming the key"
    )
    func postgres() async throws {
        let url = try makePostgresDatabase()
        let schema = try #require(PostgresSchema(name: "receipt_worker"))
        let version5 =
            (["BEGIN"] + schema.bootstrap
            + schema.migrations.prefix(5).flatMap { $0.statements + [schema.record($0)] } + ["COMMIT"])
            .map { $0 + ";" }.joined(separator: "\n")
        #expect(runPsql(url, version5) == 0)
        let rows = Self.rows.map { $0.replacingOccurrences(of: "INSERT INTO ", with: "INSERT INTO receipt_worker.") }
        #expect(runPsql(url, rows.joined(separator: ";\n")) == 0)
        let refused = await #expect(throws: LedgerError.self) { try await LedgerFactory.open(url: url, poolSize: 1) }
        #expect(refused?.key == "apple.bundle_id")
        let ledger = try await LedgerFactory.open(url: url, poolSize: 2, defaultBundleID: Self.defaultBundle)
        try await expectEachRowItsApp(ledger)
        #expect(try await ledger.recordedOffsets(group: "receipt-worker").startedEmpty == false)
        // The previous release's record functions are gone: a replica of it still running fails its decisions.
        #expect(runPsql(url, "SELECT * FROM receipt_worker.record_batch_v2('{}', '{}', '{}', '{}', '{}')") != 0)
        await ledger.close()
        let other = await #expect(throws: LedgerError.self) {
            try await LedgerFactory.open(url: url, poolSize: 1, defaultBundleID: "com.example.typo")
        }
        #expect(other?.key == "apple.bundle_id" && other?.reason.contains(Self.defaultBundle) == true)
    }
}
