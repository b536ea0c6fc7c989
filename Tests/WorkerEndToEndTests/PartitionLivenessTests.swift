import Foundation
import Kafka
import Observability
import Synchronization
import TestSupport
import Testing
import Configuration
import Flows
import ReceiptWorker

@Suite("Partitions keep moving: rebalances while intake is paused, and the stall alarm", .timeLimit(.minutes(3)))
struct PartitionLivenessTests {
    /// The stall of a partition paused by the intake and handed back by a rebalance: librdkafka keeps the
    /// application's pause across a revoke and a re-assign, so a partition that came back paused was never
    /// fetched again.
    @Test(
        "a partition paused by the intake, revoked and handed back is read again: every job is answered",
        arguments: ["range,roundrobin", "cooperative-sticky"])
    func pausedPartitionComesBack(strategy: String) async throws {
        let harness = try await WorkerHarness {
            $0.kafka["partition.assignment.strategy"] = strategy
            $0.maxInFlight = 2
            $0.drainTimeout = .zero  // revoked partitions are released at once, with their jobs still in flight
        }
        try await harness.faults(["latency_ms": 2_500])
        var purchases: [(String, WorkerHarness.Purchase)] = []
        for index in 0..<40 {
            purchases.append(("j-\(index)", try await harness.purchase(["product_id": "coins.100"])))
        }
        // Two running and more than twenty waiting (ten budgets of two): intake pauses. Sent together: one by one,
        // on a busy machine, the first were answered before the last arrived.
        try await harness.submit(
            together: purchases.prefix(30).map { id, purchase in
                job(id, order: "o-\(id)", product: "coins.100", ["receipt": purchase.receipt])
            })
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.worker.metrics.registry.render().contains("\nreceipt_worker_intake_paused 1\n")
            })

        // A second member joins: every partition is revoked from the worker, which drains; then it leaves
        // and the worker gets every partition back.
        let member = try KafkaConsumer(
            configuration: .init(
                bootstrapServers: WorkerHarness.bootstrap, groupID: harness.groupID,
                properties: [
                    "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "max.poll.interval.ms": "10000",
                    "partition.assignment.strategy": strategy,
                ]),
            logger: Logger(label: "member", minimumLevel: .error))
        try member.subscribe(topics: [harness.topics.jobs])
        let joined = Task {
            for await event in member.events {
                switch event {
                case .partitionsAssigned: return true
                case .partitionsRevoked(let revocation): revocation.done()
                default: continue  // its messages are never committed: the worker reads them again
                }
            }
            return false
        }
        #expect(await joined.value)
        try await harness.faults(["latency_ms": 0])
        await member.close()

        for (id, purchase) in purchases.suffix(10) {
            try await harness.submit(job(id, order: "o-\(id)", product: "coins.100", ["receipt": purchase.receipt]))
        }
        let answered = await eventually(timeout: .seconds(60)) {
            purchases.allSatisfy { !harness.results(jobID: $0.0).isEmpty }
        }
        let missing = purchases.filter { harness.results(jobID: $0.0).isEmpty }.map(\.0)
        #expect(answered, "jobs never answered: \(missing)")
        for (id, _) in purchases { #expect(harness.results(jobID: id).first?["decision"] as? String == "grant") }
        await harness.stop()
    }

    @Test("a partition with lag that makes no progress raises the idle gauge, a warning and /readyz; it clears after")
    func stallAlarm() async throws {
        let lines = Mutex<[String]>([])
        let harness = try await WorkerHarness(workerLog: LogSink { line in lines.withLock { $0.append(line) } }) {
            $0.maxInFlight = 1
            $0.stallTimeout = .seconds(2)
            $0.httpTimeout = .seconds(30)
        }
        // Apple answers after 8 s: the one slot is busy, intake pauses, the jobs behind it wait.
        try await harness.faults(["latency_ms": 8_000])
        var ids: [String] = []
        for index in 0..<6 {
            let purchase = try await harness.purchase(["product_id": "coins.100"])
            ids.append("stall-\(index)")
            try await harness.submit(
                job("stall-\(index)", order: "o-stall-\(index)", product: "coins.100", ["receipt": purchase.receipt]),
                key: "same-partition")
        }
        #expect(
            await eventually(timeout: .seconds(60)) { harness.worker.readiness.contains { $0.contains("stalled") } })
        let problems = harness.worker.readiness
        #expect(problems.contains { $0.contains("stalled") && $0.contains(harness.topics.jobs) }, "\(problems)")
        let metrics = harness.worker.metrics.registry.render()
        let idle = metrics.split(separator: "\n").filter { $0.hasPrefix("receipt_worker_partition_idle_seconds{") }
        #expect(idle.contains { (Double($0.split(separator: " ").last ?? "") ?? 0) >= 2 }, "\(idle)")
        #expect(metrics.contains("receipt_worker_partition_lag{"))
        #expect(await eventually { lines.withLock { $0 }.contains { $0.contains("partition stalled") } })

        try await harness.faults(["latency_ms": 0])
        #expect(await eventually(timeout: .seconds(60)) { ids.allSatisfy { !harness.results(jobID: $0).isEmpty } })
        #expect(await eventually(timeout: .seconds(60)) { harness.worker.isReady }, "\(harness.worker.readiness)")
        #expect(await eventually { lines.withLock { $0 }.contains { $0.contains("partition moving again") } })
        await harness.stop()
    }
}
