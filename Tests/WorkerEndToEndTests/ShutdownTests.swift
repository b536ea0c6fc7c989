import Foundation
import Kafka
import TestSupport
import Testing

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
            #expect(await eventually { metrics().contains("receipt_worker_apple_retries_total 5") })
        } else {
            #expect(await eventually { metrics().contains(#"receipt_worker_circuit_state{state="open"} 1"#) })
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
