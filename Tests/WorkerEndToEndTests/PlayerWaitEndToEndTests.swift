import Foundation
import Testing
import TestSupport

@testable import ReceiptWorker
import Flows
import Observability

/// What a player waits, as on call sees it on `/metrics` (docs/metrics.md, "What players wait"): a backlog held in
/// Kafka (no replica consuming) moves the wait from each job's send and the lag in seconds, while the time from
/// taking a job to its answer stays what Apple and the ledger take.
@Suite("What a player waits: from the job's send, and the lag in seconds")
struct PlayerWaitEndToEndTests {
    /// The value of one sample of the worker's metrics (the first line starting `name{labels...}`), or nil.
    static func sample(_ text: String, _ prefix: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(prefix) }
            .flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
    }

    @Test(
        "jobs that waited in Kafka while no replica consumed: job_wait counts their wait from the send and the lag gauge their age, job_duration only Apple's second"
    )
    func backlogInKafka() async throws {
        let harness = try await WorkerHarness()
        let first = try await harness.purchase(["product_id": "coins_100"])
        try await harness.submit(job("job-0", order: "order-0", product: "coins_100", ["receipt": first.receipt]))
        #expect(await harness.result(jobID: "job-0")?["decision"] as? String == "grant")

        // No replica consumes: the jobs wait in Kafka, a backlog the worker cannot see.
        await harness.stopWorker()
        let sent = Date()
        for index in 1...5 {
            let bought = try await harness.purchase(["product_id": "coins_100"])
            try await harness.submit(
                job("job-\(index)", order: "order-\(index)", product: "coins_100", ["receipt": bought.receipt]))
        }
        let lastSent = Date()
        try await Task.sleep(for: .seconds(3))  // the backlog ages: the scenario itself
        try await harness.faults(["latency_ms": 1_500])  // Apple takes 1.5 s: each job stays in flight a while
        let restarted = Date()  // no job was taken before this
        try await harness.startWorker()
        // While they are in flight, the lag gauge says how old the oldest unanswered job is: the backlog's age.
        var lag: Double?
        _ = await eventually(timeout: .seconds(60)) {
            lag = Self.sample(
                harness.worker.metrics.registry.render(), "receipt_worker_job_lag_seconds{app=\"default\"")
            return (lag ?? 0) >= 3
        }
        #expect((lag ?? 0) >= 3, "the lag in seconds shows the backlog while its jobs are answered")
        for index in 1...5 {
            #expect(await harness.result(jobID: "job-\(index)")?["decision"] as? String == "grant")
        }
        let text = harness.worker.metrics.registry.render()
        let waited = Date().timeIntervalSince(sent)
        let count = Self.sample(text, "receipt_worker_job_wait_seconds_count{app=\"default\"}") ?? 0
        let withinTwo = Self.sample(text, "receipt_worker_job_wait_seconds_bucket{app=\"default\",le=\"2\"}") ?? 0
        #expect(count == 5, "the restarted worker answered the five")
        #expect(withinTwo == 0, "each waited at least 3 s from its send (\(waited) s in all)")
        // Each job was sent before `lastSent` and taken after `restarted`, so its wait exceeds its duration by at
        // least that gap: the duration is counted from the take (Apple's 1.5 s and the worker's own time), never the
        // backlog's, however slow the machine is. One job timed from its send would leave the sum a gap short.
        let durations = Self.sample(text, "receipt_worker_job_duration_seconds_count{app=\"default\"}") ?? 0
        let durationSum = Self.sample(text, "receipt_worker_job_duration_seconds_sum{app=\"default\"}") ?? 0
        let waitSum = Self.sample(text, "receipt_worker_job_wait_seconds_sum{app=\"default\"}") ?? 0
        let gap = restarted.timeIntervalSince(lastSent)
        #expect(durations == 5, "the five answers were timed from their take")
        #expect(durationSum >= 5 * 1.5, "each took at least Apple's 1.5 s (\(durationSum) s in all)")
        #expect(
            waitSum - durationSum >= 5 * gap,
            "from taking each to its answer: Apple's 1.5 s, not the backlog (waits \(waitSum) s, durations \(durationSum) s, each sent at least \(gap) s before the worker started)"
        )
        // Answered: no job is waiting, so no lag is shown.
        #expect(Self.sample(text, "receipt_worker_job_lag_seconds{app=\"default\"") == nil)
        await harness.stop()
    }
}
