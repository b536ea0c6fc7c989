import CSQLite
import Foundation
import TestSupport
import Testing
import Vocabulary

@testable import Ledger

/// Refunds a ledger remembered before it had apps, of purchases no grant named then: the migration that gave it
/// apps (a release before 1.0.0) left them with app and environment `*`, for every app. A job claiming such a
/// purchase is told it was refunded, by its purchase or by its transaction, on either database.
@Suite("Refunds remembered before the ledger had apps", .timeLimit(.minutes(1)))
struct LegacyRefundLedgerTests {
    /// A migrated ledger holding two such refunds: purchase `800` (transaction `800`) and a period `w:S7` whose
    /// transaction is `801`, plus one in an app's own environment, which only that app's claims meet.
    static func ledger(_ backend: Backend) async throws -> any Ledger {
        let rows = """
            INSERT INTO {schema}purchase_states (app, environment, purchase_id, transaction_id, revoked, changed_at)
                VALUES ('*', '*', '800', '800', TRUE, {t}), ('*', '*', 'w:S7', '801', TRUE, {t}),
                    ('other-app', 'Production', '802', '802', TRUE, {t});
            """
        switch backend {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("legacy-\(UUID()).sqlite").path
            let ledger = try await LedgerFactory.open(url: "sqlite:\(path)")
            var db: OpaquePointer?
            #expect(sqlite3_open(path, &db) == SQLITE_OK)
            defer { sqlite3_close(db) }
            let sql = rows.replacingOccurrences(of: "{schema}", with: "")
                .replacingOccurrences(of: "TRUE", with: "1").replacingOccurrences(
                    of: "{t}", with: "'2022-03-01T00:00:00Z'")
            #expect(sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK)
            return ledger
        case .postgresql:
            let url = try makePostgresDatabase()
            let ledger = try await LedgerFactory.open(url: url, poolSize: 2)
            let sql = rows.replacingOccurrences(of: "{schema}", with: "receipt_worker.")
                .replacingOccurrences(of: "{t}", with: "'2022-03-01T00:00:00Z'")
            #expect(psqlLines(url, sql) != nil)
            return ledger
        }
    }

    @Test(
        "a claim of such a purchase, by its id or by its transaction's, is told revoked; others are granted",
        arguments: Backend.allCases)
    func legacyRefunds(backend: Backend) async throws {
        let ledger = try await Self.ledger(backend)
        let event = Data(#"{"decision":"grant"}"#.utf8)
        #expect(
            try await ledger.record(jobID: "j1", claim: .grant(orderID: "o1", transactionID: "800"), event: event)
                == .revoked)
        // The period's purchase key found under another transaction id than the one its refund remembered.
        let period = LedgerClaim.grant(
            orderID: "o2", transactionID: "799", purchaseID: .billingPeriod(webOrderLineItemID: "S7"))
        #expect(try await ledger.record(jobID: "j2", claim: period, event: event) == .revoked)
        // The transaction id found under another purchase key: a claim of the transaction as a purchase of its own.
        #expect(
            try await ledger.record(jobID: "j3", claim: .grant(orderID: "o3", transactionID: "801"), event: event)
                == .revoked)
        // Another app's refund is not every app's; a purchase no refund names is granted.
        #expect(
            try await ledger.record(jobID: "j4", claim: .grant(orderID: "o4", transactionID: "802"), event: event)
                == .recorded)
        #expect(
            try await ledger.record(jobID: "j5", claim: .grant(orderID: "o5", transactionID: "803"), event: event)
                == .recorded)
        await ledger.close()
    }
}
