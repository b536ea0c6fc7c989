import Foundation
@testable import Ledger
import TestSupport
import Testing
import Vocabulary

/// PostgreSQL beneath the ledger: a transaction whose start failed, and the locks a claim takes.
@Suite("A PostgreSQL connection after a failed transaction start", .timeLimit(.minutes(1)))
struct PostgresTransactionStartTests {
    @Test("a setting refused after BEGIN fails that transaction only: the connection's next one works")
    func refusedSettingEndsTheTransaction() throws {
        let connection = try PostgresConnection(url: try makePostgresDatabase())
        #expect(throws: LedgerError.self) {
            try connection.transaction(["no_such_setting_at_all = 1"]) { Issue.record("ran in a failed transaction") }
        }
        let answer = try connection.transaction { try connection.query("SELECT 41 + 1") }
        #expect(answer == ["42"])
    }
}

@Suite("A claim on PostgreSQL meets a refund that names its transaction alone", .timeLimit(.minutes(1)))
struct PostgresClaimTransactionLockTests {
    @Test(
        "a claim of a billing period waits while its transaction's lock is held (a revocation naming the transaction): the two never commit unseen by each other"
    )
    func claimTakesTheTransactionsLock() async throws {
        let url = try makePostgresDatabase()
        let ledger = try await LedgerFactory.open(url: url, poolSize: 2)
        // What a REVOKE of the transaction holds while it reads the purchase: the lock of the transaction alone.
        let holder = try PostgresConnection(url: url)
        let key = PurchaseStatements.lockKey(
            PurchaseKey(app: .defaultApp, environment: .production, purchaseID: .transaction("900")))
        try holder.query("BEGIN")
        try holder.query("SELECT pg_advisory_xact_lock(hashtext($1))", [key])
        let period = LedgerClaim.grant(
            orderID: "o-900", transactionID: "900", purchaseID: .billingPeriod(webOrderLineItemID: "W900"))
        let claim = Task {
            try await ledger.record(jobID: "j-900", claim: period, event: Data(#"{"decision":"grant"}"#.utf8))
        }
        try await Task.sleep(for: .milliseconds(500))
        let stored = try await ledger.storedEvent(jobID: "j-900")
        #expect(stored == nil, "the claim committed while the transaction's lock was held")
        try holder.query("COMMIT")
        #expect(try await claim.value == .recorded)
        await ledger.close()
    }
}
