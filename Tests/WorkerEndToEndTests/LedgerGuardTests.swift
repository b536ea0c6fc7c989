import Foundation
import Ledger
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

    @Test(
        "restore drill: a backup taken while the worker decides, restored after more grants, is refused; rewind-group moves the group back, the jobs the backup lacks are decided again with their event ids, and no purchase is granted twice"
    )
    func restoreFromBackup() async throws {
        let harness = try await ProcessHarness()
        let directory = FileManager.default.temporaryDirectory
        let file = directory.appendingPathComponent("restore-\(harness.suffix).sqlite").path
        let backup = directory.appendingPathComponent("restore-\(harness.suffix)-backup.sqlite").path
        let config = try harness.config(ledger: "sqlite:\(file)")
        var purchases: [String] = []
        for _ in 0..<10 { purchases.append(try await harness.purchase(product: "coins").receipt) }
        let worker = try WorkerProcess(config: config)
        try await harness.submit(
            (0..<5).map { job("early-\($0)", order: "order-\($0)", product: "coins", ["receipt": purchases[$0]]) })
        #expect(await eventually { harness.answeredJobs == 5 }, "log:\n\(worker.log.suffix(2000))")
        // An answer is published before its offset is committed (and recorded in the ledger, just before the
        // commit): the backup is taken once the ledger holds the five early jobs' offsets, so what it lacks is
        // exactly the five late jobs.
        #expect(
            await eventually(timeout: .seconds(30)) {
                await recordedOffsetCount(ledger: file, group: "workers-\(harness.suffix)") == 5
            })
        // Last night's backup, taken while the worker runs.
        let copied = try await CommandLineRun.run(["ledger", "backup", "--to", backup, "--config", config])
        #expect(copied.status == 0, "\(copied.output)\(copied.errors)")
        #expect(copied.output.contains("copied the ledger to \(backup)"))
        try await harness.submit(
            (5..<10).map { job("late-\($0)", order: "order-\($0)", product: "coins", ["receipt": purchases[$0]]) })
        #expect(await eventually { harness.answeredJobs == 10 })
        #expect(await worker.stop(SIGTERM) == 0)
        let firstGrants = harness.results.mapValues { $0.compactMap { $0["event_id"] as? String } }

        // The bad day: the ledger is restored from the backup, which lacks the five late grants.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + suffix) }
        try FileManager.default.copyItem(atPath: backup, toPath: file)
        let refused = try WorkerProcess(config: config)
        #expect(await exitStatus(of: refused.pid, killedAfter: .seconds(60)) == 2, "log:\n\(refused.log.suffix(2000))")
        #expect(refused.log.contains("ledger rewind-group"))

        let dry = try await CommandLineRun.run(["ledger", "rewind-group", "--dry-run", "--config", config])
        #expect(dry.status == 0 && dry.output.contains("would move"), "\(dry.output)\(dry.errors)")
        let rewound = try await CommandLineRun.run(["ledger", "rewind-group", "--config", config])
        #expect(rewound.status == 0, "\(rewound.output)\(rewound.errors)")
        // The five late jobs, over whichever partitions their keys chose.
        let moved = rewound.output.split(separator: "\n").compactMap { line -> Int? in
            guard let open = line.firstIndex(of: "(") else { return nil }
            return Int(line[line.index(after: open)...].prefix { $0.isNumber })
        }
        #expect(moved.reduce(0, +) == 5, "\(rewound.output)")
        let replaying = try WorkerProcess(config: config)
        // Each late job is decided again, granted to its order with the event id it had: a grant service that
        // credited it the first time deduplicates it.
        #expect(
            await eventually(timeout: .seconds(60)) {
                (5..<10).allSatisfy { (harness.results["late-\($0)"] ?? []).count >= 2 }
            }, "log:\n\(replaying.log.suffix(2000))")
        for index in 5..<10 {
            let answers = harness.results["late-\(index)"] ?? []
            #expect(answers.allSatisfy { $0["decision"] as? String == "grant" })
            #expect(Set(answers.compactMap { $0["event_id"] as? String }) == Set(firstGrants["late-\(index)"] ?? []))
        }
        // Nothing granted twice: every proof presented again for another order is denied, early and late.
        try await harness.submit(
            (0..<10).map { job("again-\($0)", order: "other-\($0)", product: "coins", ["receipt": purchases[$0]]) })
        #expect(await eventually { (0..<10).allSatisfy { harness.results["again-\($0)"] != nil } })
        for index in 0..<10 {
            #expect(harness.results["again-\(index)"]?.first?["reason"] as? String == "duplicate_transaction")
        }
        #expect(await replaying.stop(SIGTERM) == 0)
        await harness.stop()
    }
}

/// How many messages the ledger at `path` has recorded as committed for `group`, over all partitions (each
/// partition's recorded next offset; the test's topics start at offset 0).
private func recordedOffsetCount(ledger path: String, group: String) async -> Int64 {
    guard let ledger = try? LedgerEngine.sqlite(path: path),
        let recorded = try? await ledger.recordedOffsets(group: group)
    else { return -1 }
    return recorded.offsets.values.reduce(0, +)
}
