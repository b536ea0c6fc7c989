import Kafka
import Runtime
import Testing

/// W3C Trace Context as the runtime reads it from a consumed message: what it copies, and what it ignores.
@Suite struct TraceContextTests {
    static let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test("a well-formed traceparent and tracestate are carried; the trace id is what log lines show")
    func wellFormed() throws {
        let trace = try #require(
            TraceContext(headers: [
                MessageHeader(name: "traceparent", string: Self.parent),
                MessageHeader(name: "tracestate", string: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
            ]))
        #expect(trace.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(trace.headers.map(\.name) == ["traceparent", "tracestate"])
        #expect(trace.headers.map(\.stringValue) == [Self.parent, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"])
    }

    @Test(
        "a malformed traceparent is ignored, never an error",
        arguments: [
            "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  // no flags
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper case
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // trace id all zeros
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // parent id all zeros
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // forbidden version
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  // version 00 has no more fields
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\u{301}1",  // a combining mark
            String(repeating: "0", count: 100_000),
        ])
    func malformed(_ value: String) {
        #expect(TraceContext(headers: [MessageHeader(name: "traceparent", string: value)]) == nil)
    }

    @Test("a later version may add fields; a tracestate that is not printable ASCII is dropped, the parent kept")
    func laterVersionAndBadState() throws {
        // Carried on as version 00 of its fields: nothing it added (a line end, a header of its own) passed on.
        let later = try #require(
            TraceContext(headers: [
                MessageHeader(
                    name: "traceparent",
                    string: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x\r\nX-Injected: 1")
            ]))
        #expect(later.traceparent == Self.parent)
        let trace = try #require(
            TraceContext(headers: [
                MessageHeader(name: "traceparent", string: Self.parent),
                MessageHeader(name: "tracestate", string: "a=\u{1}b"),
            ]))
        #expect(trace.tracestate == nil && trace.headers.count == 1)
    }
}
