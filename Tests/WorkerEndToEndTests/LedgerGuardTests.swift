import Foundation
import TestSupport
import Testing

/// A ledger that starts empty under a consumer group that has already processed jobs is refused, not believed
/// (docs/internals.md, "A ledger that starts empty"): its missing grants would let purchases be granted again.
@Suite("A ledger that starts empty", .serialized, .timeLimit(.minutes(5)))
struct LedgerGuardTests {
    @Test(
        "the SQLite file deleted between two runs: the worker exits 2 naming the fix instead of deciding on an empty ledger; accept-offsets lets it start; the same ledger again starts"
    )
    func emptyLedgerRefused() async throws {
        let harness = try await ProcessHarness()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("guard-\(harness.suffix).sqlite").path
        let config = try harness.config(ledger: "sqlite:\(file)")
        let purchase = try await harness.purchase(product: "coins")
        try await harness.submit([job("first", order: "order-1", product: "coins", ["receipt": purchase.receipt])])

        // The honest case: a worker answers, commits (recording the offsets in the ledger first), stops, and
        // starts again on the same ledger.
        let first = try WorkerProcess(config: config)
        #expect(await eventually { harness.answeredJobs == 1 })
        #expect(await first.stop(SIGTERM) == 0, "log:\n\(first.log.suffix(2000))")
        let again = try WorkerProcess(config: config)
        #expect(await eventually { again.log.contains("worker started") }, "log:\n\(again.log.suffix(2000))")
        #expect(await again.stop(SIGTERM) == 0)

        // The file is lost (a fresh volume): the worker refuses to start instead of granting again.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + suffix) }
        let refused = try WorkerProcess(config: config)
        #expect(await exitStatus(of: refused.pid, killedAfter: .seconds(60)) == 2, "log:\n\(refused.log.suffix(2000))")
        #expect(refused.log.contains("ledger does not match the consumer group"))
        #expect(refused.log.contains("ledger accept-offsets"))
        #expect(!refused.log.contains("worker started"))

        // The operator says the ledger is new on purpose.
        let accepted = try await CommandLineRun.run(["ledger", "accept-offsets", "--config", config])
        #expect(accepted.status == 0, "\(accepted.output)\(accepted.errors)")
        #expect(accepted.output.contains("jobs-\(harness.suffix)["))
        let started = try WorkerProcess(config: config)
        #expect(await eventually { started.log.contains("worker started") }, "log:\n\(started.log.suffix(2000))")
        #expect(await started.stop(SIGTERM) == 0)
        await harness.stop()
    }
}
