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

    @Test(
        "COMMIT runs without the statement timeout: a wait at commit (a synchronous standby's) is never cut short into a commit the standby may lack"
    )
    func commitWaitsWithoutDeadline() throws {
        let connection = try PostgresConnection(url: try makePostgresDatabase())
        // A deferred trigger stands for the standby: it makes COMMIT itself wait 400 ms, past the transaction's
        // statement timeout. PostgreSQL ends a statement's timeout before the commit's own work (finish_xact_command),
        // so neither this wait nor a synchronous standby's is cut short (which, for the standby's, would be a success
        // and a warning: committed here, maybe not there). Should the worker ever commit inside a timed statement
        // (a function, a multi-statement query), this fails.
        try connection.query(
            """
            CREATE TABLE commit_wait (id int);
            """)
        try connection.query(
            """
            CREATE FUNCTION commit_wait_sleep() RETURNS trigger LANGUAGE plpgsql AS
                $$ BEGIN PERFORM pg_sleep(0.4); RETURN NULL; END $$
            """)
        try connection.query(
            """
            CREATE CONSTRAINT TRIGGER commit_wait_trigger AFTER INSERT ON commit_wait DEFERRABLE INITIALLY DEFERRED
                FOR EACH ROW EXECUTE FUNCTION commit_wait_sleep()
            """)
        _ = try connection.transaction(["statement_timeout = 100"]) {
            try connection.query("INSERT INTO commit_wait VALUES (1)")
        }
        #expect(try connection.query("SELECT count(*) FROM commit_wait") == ["1"], "the commit was cut short")
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
