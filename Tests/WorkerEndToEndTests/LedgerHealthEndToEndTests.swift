import Foundation
import TestSupport
import Testing
import Configuration
import Flows
import Observability
import ReceiptWorker

/// A PostgreSQL of this test's own (the shared one serves every other test), started and stopped with the
/// test command's own scripts.
struct PrivatePostgres {
    let url: String
    let directory: String

    /// Up to three attempts, each on a fresh port and folder: a port found free can be taken by another test
    /// before PostgreSQL binds it (seen once in CI); what the last attempt printed is the error.
    static func start() throws -> PrivatePostgres {
        let root = MetricsEndpointTests.repositoryRoot.path
        var output = ""
        for _ in 0..<3 {
            output = try shell(
                "source \(root)/scripts/lib/services.sh; log=$(mktemp);"
                    + " if services_start_postgres >\"$log\" 2>&1; then echo \"$POSTGRES_URL $SERVICES_DIR\";"
                    + " else services_stop >/dev/null 2>&1; tail -c 600 \"$log\" | tr '\\n' ' '; fi; rm -f \"$log\"")
            let parts = output.split(separator: " ").map(String.init)
            if parts.count == 2, parts[0].hasPrefix("postgresql://") {
                return PrivatePostgres(url: parts[0], directory: parts[1])
            }
        }
        throw ProcessError("cannot start a private PostgreSQL: \(output)")
    }

    /// SIGSTOP (true) or SIGCONT (false) to every process of the cluster: a server hung, not gone.
    func freeze(_ frozen: Bool) throws {
        let postmaster =
            try String(contentsOfFile: "\(directory)/postgres/postmaster.pid", encoding: .utf8)
            .split(separator: "\n").first.map(String.init) ?? ""
        let signal = frozen ? "STOP" : "CONT"
        _ = try shell("kill -\(signal) \(postmaster); pkill -\(signal) -P \(postmaster) || true")
    }

    func stop() throws {
        try freeze(false)
        _ = try shell(
            "source \(MetricsEndpointTests.repositoryRoot.path)/scripts/lib/services.sh && SERVICES_DIR=\(directory) services_stop"
        )
    }
}

/// Runs a bash command line; returns its standard output, trimmed.
func shell(_ command: String) throws -> String {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("shell-\(UUID())")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let out = directory.appendingPathComponent("out").path
    let pid = try spawnProcess(
        "/bin/bash", ["-c", command], environment: [:], output: out,
        errors: directory.appendingPathComponent("err").path)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
}

@Suite("The ledger's health, end to end", .timeLimit(.minutes(3)))
struct LedgerHealthEndToEndTests {
    @Test("a hung PostgreSQL (SIGSTOP) makes /readyz fail and ledger_up 0 within the health interval; it recovers")
    func hungPostgres() async throws {
        let postgres = try PrivatePostgres.start()
        defer { try? postgres.stop() }
        let harness = try await WorkerHarness { $0.ledgerURL = postgres.url }
        let ledgerUp = { harness.worker.metrics.registry.render().contains("\nreceipt_worker_ledger_up 1\n") }
        #expect(await eventually(timeout: .seconds(30)) { harness.worker.isReady })
        try postgres.freeze(true)
        // Every 5 s a check with its own 5 s deadline: unready within about 10 s, not after TCP's minutes (the
        // bound leaves a busy machine room).
        let started = ContinuousClock.now
        #expect(await eventually(timeout: .seconds(40)) { !ledgerUp() })
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(harness.worker.readiness.contains("ledger unreachable"))
        try postgres.freeze(false)
        #expect(await eventually(timeout: .seconds(30)) { ledgerUp() && harness.worker.isReady })
        await harness.stop()
    }

    @Test("a SQLite ledger file deleted under the worker makes it unready and refuses decisions; nothing is granted")
    func deletedSQLite() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("deleted-\(UUID()).sqlite").path
        let harness = try await WorkerHarness { $0.ledgerURL = "sqlite:" + path }
        #expect(await eventually(timeout: .seconds(30)) { harness.worker.isReady })
        try FileManager.default.removeItem(atPath: path)
        #expect(await eventually(timeout: .seconds(15)) { harness.worker.readiness.contains("ledger unreachable") })
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        let failures = harness.metric("receipt_worker_failures_total", "operation=\"ledger_")
        try await harness.submit(job("after-delete", order: "o-1", product: "coins.100", ["receipt": purchase.receipt]))
        // The job taken and refused by the ledger, twice (it waits in its slot for the ledger to heal).
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.metric("receipt_worker_failures_total", "operation=\"ledger_") >= failures + 2
                    || !harness.results(jobID: "after-delete").isEmpty
            }, "the job was never tried")
        #expect(harness.results(jobID: "after-delete").isEmpty, "no decision on a ledger that is gone")
        await harness.stop()
    }
}
