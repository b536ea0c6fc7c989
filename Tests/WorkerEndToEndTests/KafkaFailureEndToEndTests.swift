import Foundation
import Kafka
import TestSupport
import Testing
import Configuration

/// A Kafka send that can never succeed must end; a topic that is not there stops start-up.
@Suite("Kafka failures that never heal", .timeLimit(.minutes(3)))
struct KafkaFailureEndToEndTests {
    @Test("a dead letter too large for a record goes as a stub with its size and provenance; the partition moves on")
    func oversizedDeadLetter() async throws {
        let harness = try await WorkerHarness { $0.kafka["message.max.bytes"] = "200000" }
        // Over jobs.max_bytes (256 KB), so a DLQ copy; over the worker's record limit too.
        let huge =
            "{\"job_id\":\"big\",\"order_id\":\"o-big\",\"padding\":\"" + String(repeating: "x", count: 300_000)
            + "\"}"
        try await harness.submit(raw: Data(huge.utf8), key: "same-key")
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        try await harness.submit(
            job("after", order: "o-after", product: "coins.100", ["receipt": purchase.receipt]), key: "same-key")
        #expect(await harness.result(jobID: "after", timeout: .seconds(60))?["decision"] as? String == "grant")
        #expect(await eventually { harness.deadLetters.count == 1 })
        let stub = try #require(harness.deadLetters.first)
        #expect(stub.value.isEmpty)
        #expect(stub.key == Array("same-key".utf8))
        #expect(stub.header("dlq_truncated")?.stringValue == "true")
        #expect(stub.header("dlq_original_bytes")?.stringValue == String(huge.utf8.count))
        #expect(stub.header("dlq_reason")?.stringValue == "malformed_job")
        #expect(stub.header("dlq_source_topic")?.stringValue == harness.topics.jobs)
        await harness.stop()
    }

    @Test("a results or DLQ topic that does not exist stops start-up with exit 2, naming its key")
    func missingTopic() async throws {
        let harness = try await ProcessHarness()
        let config = try harness.config(
            ledger: "sqlite:"
                + FileManager.default.temporaryDirectory.appendingPathComponent("missing-topic-\(UUID()).sqlite").path,
            extra: ["topics.dlq": "no-such-topic-\(UUID())"])
        let worker = try WorkerProcess(config: config)
        let status = await exitStatus(of: worker.pid, killedAfter: .seconds(30))
        #expect(status == 2, "log: \(worker.log.suffix(1500))")
        #expect(worker.log.contains("topics.dlq"))
        await harness.stop()
    }
}
