import Foundation
@testable import Ledger
import LedgerDomain
import TestSupport
import Testing

/// The PostgreSQL pool on a bad day: a connection whose server is no longer a primary is replaced, as one whose
/// socket broke is (`LedgerTests.poolHeals`).
@Suite("The PostgreSQL pool")
struct PostgresPoolTests {
    let event = Data(#"{"decision":"deny","event_id":"e1"}"#.utf8)

    /// One connection, turned read-only as an old primary's are after a failover (by its session's setting here).
    func readOnlyLedger() async throws -> (LedgerEngine, PostgresDialect) {
        let schema = try #require(PostgresSchema(name: PostgresSchema.defaultName))
        let dialect = try await PostgresDialect(url: try makePostgresDatabase(), poolSize: 1, schema: schema)
        _ = try await dialect.pool.withConnection {
            try $0.query("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        }
        return (LedgerEngine(dialect: dialect), dialect)
    }

    @Test("a write refused as read-only replaces its connection: the next is recorded")
    func readOnlyReplaced() async throws {
        let (ledger, dialect) = try await readOnlyLedger()
        await #expect {
            try await ledger.record(jobID: "j1", claim: .deny, event: event)
        } throws: { ($0 as? LedgerError)?.sqlstate == "25006" }
        // The worker retries the job: the connection it meets now writes.
        #expect(try await ledger.record(jobID: "j1", claim: .deny, event: event) == .recorded)
        #expect(dialect.pool.stats.open == 1)
        await ledger.close()
    }

    @Test("a ping that finds the server read-only replaces its connection: the next answers")
    func readOnlyPing() async throws {
        let (ledger, _) = try await readOnlyLedger()
        await #expect(throws: LedgerError.self) { try await ledger.ping() }
        try await ledger.ping()
        await ledger.close()
    }
}
