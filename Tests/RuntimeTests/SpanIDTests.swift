import Observability
import Testing

/// A span's ids as the tracer draws them and as they travel: in a `traceparent` and in an OTLP export.
@Suite struct SpanIDTests {
    @Test("a traceparent read and written again is the same text, its ids the same words")
    func traceparentRoundTrip() throws {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let context = try #require(SpanContext(traceparent: text))
        #expect(context.traceID == TraceID(high: 0x4bf9_2f35_77b3_4da6, low: 0xa3ce_929d_0e0e_4736))
        #expect(context.spanID == SpanID(0x00f0_67aa_0ba9_02b7))
        #expect(context.traceparent == text)
        #expect(context.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        let unsampled = SpanContext(traceID: context.traceID, spanID: SpanID(1), sampled: false)
        #expect(unsampled.traceparent == "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000001-00")
    }

    @Test("drawn ids are valid and differ: 100,000 span ids, 10,000 trace ids, none zero, none twice")
    func drawnIDs() {
        var spans = Set<SpanID>()
        for _ in 0..<100_000 { spans.insert(IDWords.spanID()) }
        #expect(spans.count == 100_000)
        #expect(!spans.contains(SpanID(0)))
        var traces = Set<TraceID>()
        for _ in 0..<10_000 { traces.insert(IDWords.traceID()) }
        #expect(traces.count == 10_000)
        for trace in traces.prefix(100) {
            #expect(
                SpanContext(traceparent: SpanContext(traceID: trace, spanID: SpanID(7), sampled: true).traceparent)?
                    .traceID == trace)
        }
    }

    @Test("a root is sampled at the configured ratio; a child as its parent is")
    func sampling() {
        let tracer = Tracer(sampleRatio: 0.25) { _ in }
        let roots = (0..<20_000).map { _ in tracer.start("job", kind: .consumer, parent: nil) }
        let sampled = roots.filter(\.context.sampled).count
        #expect((4_000...6_000).contains(sampled), "\(sampled) of 20,000 at 0.25")
        for root in roots.prefix(200) {
            let child = root.child("apple", kind: .client)
            #expect(child.context.sampled == root.context.sampled)
            #expect(child.context.traceID == root.context.traceID)
            #expect(child.context.spanID != root.context.spanID)
        }
        #expect(Tracer(sampleRatio: 0) { _ in }.start("job", kind: .consumer, parent: nil).context.sampled == false)
        #expect(Tracer(sampleRatio: 1) { _ in }.start("job", kind: .consumer, parent: nil).context.sampled)
    }

    @Test("an OTLP export carries the ids as their bytes, first byte first")
    func exportedIDs() throws {
        let context = try #require(SpanContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        let span = FinishedSpan(
            name: "job", kind: .consumer, context: context, parentSpanID: SpanID(0x0102_0304_0506_0708), start: 1,
            end: 2, attributes: [], error: nil)
        let body = OTLPEncoding.exportRequest([span], service: "receipt-worker", version: "1")
        // Each id is a length-delimited field: its tag, its length, then the id's bytes.
        #expect(body.contains(subsequence: [0x0A, 16] + context.traceID.bytes))
        #expect(body.contains(subsequence: [0x12, 8] + context.spanID.bytes))
        #expect(body.contains(subsequence: [0x22, 8, 1, 2, 3, 4, 5, 6, 7, 8]))
    }
}

extension Array where Element == UInt8 {
    fileprivate func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        return (0...(count - subsequence.count)).contains { Array(self[$0..<($0 + subsequence.count)]) == subsequence }
    }
}
