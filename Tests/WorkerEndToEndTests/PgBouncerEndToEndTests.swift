import Foundation
import Ledger
import ReceiptWorker
import Testing
import TestSupport

/// The PostgreSQL ledger behind Debian's PgBouncer with its defaults (scripts/with-services.sh starts one in
/// transaction pooling and one in session pooling): a fleet's ledger as large deployments run it.
@Suite("The PostgreSQL ledger behind PgBouncer", .timeLimit(.minutes(3)))
struct PgBouncerEndToEndTests {
    @Test(
        "behind PgBouncer in transaction and in session pooling, every job is answered once and a proof presented for two orders is granted to one",
        arguments: ["transaction", "session"])
    func behindPgBouncer(mode: String) async throws {
        let direct = try makePostgresDatabase()
        let pooled = try pgbouncerURL(mode: mode, database: direct)
        if mode == "transaction" {
            // As in production: the migration Job migrates on a direct connection (its steps span transactions
            // under one session lock); the workers, behind the pooler, only read the schema's version.
            await (try LedgerFactory.open(url: direct, poolSize: 1, defaultBundleID: "com.example")).close()
        }
        let harness = try await WorkerHarness { $0.ledgerURL = pooled }
        var pairs: [(String, String)] = []
        for index in 0..<40 {
            let purchase = try await harness.purchase(["product_id": "coins.100"])
            let first = "pgb-\(index)-a"
            let second = "pgb-\(index)-b"
            pairs.append((first, second))
            try await harness.submit(
                job(first, order: "o-\(index)-a", product: "coins.100", ["receipt": purchase.receipt]))
            try await harness.submit(
                job(second, order: "o-\(index)-b", product: "coins.100", ["receipt": purchase.receipt]))
        }
        let ids = pairs.flatMap { [$0.0, $0.1] }
        #expect(await eventually(timeout: .seconds(90)) { ids.allSatisfy { !harness.results(jobID: $0).isEmpty } })
        for (first, second) in pairs {
            let answers = harness.results(jobID: first) + harness.results(jobID: second)
            #expect(answers.count == 2, "\(first): answered \(answers.count) times")
            #expect(answers.filter { $0["decision"] as? String == "grant" }.count == 1, "\(first): \(answers)")
            #expect(answers.contains { $0["reason"] as? String == "duplicate_transaction" }, "\(first): \(answers)")
        }
        await harness.stop()
        // The ledger holds one grant per purchase, read on the server itself.
        #expect(psqlValue(direct, "SELECT count(*) FROM receipt_worker.grants") == "40")
    }

    /// The test's database through the PgBouncer of `mode`.
    private func pgbouncerURL(mode: String, database: String) throws -> String {
        let key = "PGBOUNCER_\(mode.uppercased())_URL"
        guard let bouncer = ProcessInfo.processInfo.environment[key] else {
            throw TestSupportError("\(key) is not set: run the tests with scripts/test.sh, which starts PgBouncer")
        }
        let name = database[database.index(after: database.lastIndex(of: "/")!)...]
        return String(bouncer[..<bouncer.lastIndex(of: "/")!]) + "/\(name)"
    }
}
