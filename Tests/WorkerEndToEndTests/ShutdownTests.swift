import Foundation
import Kafka
import TestSupport
import Testing
import Configuration
import Flows
import Observability
import ReceiptWorker

/// A SIGTERM (a KEDA scale-down, a rollout) while jobs wait for Apple must lose none of them: a job left
/// unanswered is never committed past, so the next worker answers it.
@Suite("Shutdown never loses a job", .timeLimit(.minutes(3)))
struct ShutdownTests {
    @Test(
        "SIGTERM while jobs are in a backoff or waiting at the open circuit, then a restart: every job answered once Apple is back",
        arguments: ["backoff", "circuit_open"])
    func shutdownDuringOutage(phase: String) async throws {
        let harness = try await WorkerHarness(maxAttempts: 100) {
            $0.retry.initialBackoff = .milliseconds(phase == "backoff" ? 2_000 : 20)
            $0.retry.maxBackoff = .milliseconds(phase == "backoff" ? 4_000 : 200)
            $0.drainTimeout = .seconds(2)
        }
        try await harness.faults(["error_rate": 1.0, "error_status": 503])
        var ids: [String] = []
        for index in 0..<(phase == "backoff" ? 5 : 30) {
            let purchase = try await harness.purchase(["product_id": "coins.100"])
            ids.append("\(phase)-\(index)")
            try await harness.submit(
                job(
                    "\(phase)-\(index)", order: "o-\(phase)-\(index)", product: "coins.100",
                    ["receipt": purchase.receipt]))
        }
        let metrics = { harness.worker.metrics.registry.render() }
        if phase == "backoff" {
            // Every job has failed once and waits for its backoff (a slow machine may have retried some twice).
            let retried = {
                metrics().split(separator: "\n").first { $0.hasPrefix("receipt_worker_apple_retries_total ") }
                    .flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
            }
            #expect(await eventually { retried() >= 5 })
        } else {
            #expect(
                await eventually {
                    metrics().contains(
                        #"receipt_worker_circuit_state{app="default",call="verify_receipt_production",state="open"} 1"#)
                })
        }
        try await harness.restartWorker()
        #expect(harness.deadLetters.isEmpty, "nothing is dead-lettered at a shutdown")
        #expect(ids.allSatisfy { harness.results(jobID: $0).isEmpty })

        try await harness.faults(["error_rate": 0.0])
        let answered = await eventually(timeout: .seconds(60)) {
            ids.allSatisfy { !harness.results(jobID: $0).isEmpty }
        }
        #expect(answered, "unanswered: \(ids.filter { harness.results(jobID: $0).isEmpty })")
        for id in ids { #expect(harness.results(jobID: id).first?["decision"] as? String == "grant") }
        #expect(harness.deadLetters.isEmpty)
        await harness.stop()
    }
}

@Suite("Memory is budgeted in bytes", .timeLimit(.minutes(3)))
struct ByteBudgetTests {
    @Test("200 jobs of 250 KB with Apple slow never hold more than worker.max_in_flight_bytes in flight")
    func bytesInFlight() async throws {
        let budget = 4 * 1_048_576
        let harness = try await WorkerHarness {
            $0.maxInFlightBytes = budget
            $0.jobsMaxBytes = 300_000
        }
        try await harness.faults(["latency_ms": 300])
        let padding = String(repeating: "p", count: 250_000)
        var ids: [String] = []
        for index in 0..<200 {
            let purchase = try await harness.purchase(["product_id": "coins.100"])
            var fields = job(
                "big-\(index)", order: "o-big-\(index)", product: "coins.100", ["receipt": purchase.receipt])
            fields["padding"] = padding
            ids.append("big-\(index)")
            try await harness.submit(fields)
        }
        var peak = 0.0
        let done = await eventually(timeout: .seconds(120), interval: .milliseconds(20)) {
            let line = harness.worker.metrics.registry.render().split(separator: "\n")
                .first { $0.hasPrefix("receipt_worker_jobs_in_flight_bytes{group=\"default\"} ") }
            peak = max(peak, line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0)
            return ids.allSatisfy { !harness.results(jobID: $0).isEmpty }
        }
        #expect(done)
        #expect(peak > 0)
        #expect(peak <= Double(budget), "peak \(peak) bytes in flight")
        await harness.stop()
    }
}
