import Foundation
import Kafka
import TestSupport
import Testing

/// A job's W3C trace context reaches its answer: the result event and the dead letter carry the job's
/// `traceparent` and `tracestate` headers (docs/contract.md, sections 2, 4 and 5).
@Suite("Trace context", .timeLimit(.minutes(3)))
struct TraceContextEndToEndTests {
    static let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test("a job's traceparent and tracestate are on its event and its dead letter; a malformed one is not copied")
    func propagated() async throws {
        let harness = try await WorkerHarness()
        let purchase = try await harness.purchase(["product_id": "coins"])
        let traced = [
            MessageHeader(name: "traceparent", string: Self.parent),
            MessageHeader(name: "tracestate", string: "rojo=1"),
        ]
        let tracedJob = job("traced", order: "o-traced", product: "coins", ["receipt": purchase.receipt])
        try await harness.submit(
            raw: try JSONSerialization.data(withJSONObject: tracedJob), key: "o-traced", headers: traced)
        // A malformed job with a trace: denied malformed_job and dead-lettered, both traced.
        try await harness.submit(
            raw: Data(#"{"job_id":"bad","order_id":"o-bad","user_id":"p"}"#.utf8), key: "o-bad", headers: traced)
        // A job whose traceparent is malformed: answered, no trace header copied.
        let other = try await harness.purchase(["product_id": "coins"])
        try await harness.submit(
            raw: try JSONSerialization.data(
                withJSONObject: job("untraced", order: "o-untraced", product: "coins", ["receipt": other.receipt])),
            key: "o-untraced", headers: [MessageHeader(name: "traceparent", string: "00-nonsense")])
        #expect(await eventually { !harness.resultMessages(jobID: "traced").isEmpty })
        let event = try #require(harness.resultMessages(jobID: "traced").first)
        #expect(event.header("traceparent")?.stringValue == Self.parent)
        #expect(event.header("tracestate")?.stringValue == "rojo=1")
        #expect(await eventually { harness.deadLetters.contains { $0.key.map { Array($0) } == Array("o-bad".utf8) } })
        let letter = try #require(harness.deadLetters.first { $0.key.map { Array($0) } == Array("o-bad".utf8) })
        #expect(letter.header("traceparent")?.stringValue == Self.parent)
        #expect(await eventually { !harness.resultMessages(jobID: "untraced").isEmpty })
        #expect(harness.resultMessages(jobID: "untraced").first?.header("traceparent") == nil)
        await harness.stop()
    }
}
