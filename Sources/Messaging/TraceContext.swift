package import Observability

/// W3C Trace Context (https://www.w3.org/TR/trace-context/) carried by a consumed message's `traceparent` and
/// `tracestate` headers. The runtime copies them, when well formed, to every record it publishes for that
/// message (its events, its dead letter), so a backend that traces a purchase across its services sees the
/// worker's answer in the same trace. Nothing of it goes to Apple: a trace id is the backend's, not Apple's.
public struct TraceContext: Sendable, Equatable {
    public let traceparent: String
    public let tracestate: String?
    /// The span `traceparent` names, parsed once.
    package let parent: SpanContext

    /// The 32 hex digits of the trace id, for log lines.
    public var traceID: String { String(traceparent.dropFirst(3).prefix(32)) }

    /// The message's trace context, or nil when it has none or a malformed one (ignored, never an error: a
    /// job is answered whatever its headers say).
    /// A later version's `traceparent` is carried as the version 00 of its fields: the specification lets it add
    /// fields this worker does not read, and what it copies must never pass on bytes it did not check (a line end
    /// a downstream service would put in an HTTP header).
    public init?(headers: [MessageHeader]) {
        guard let parent = headers.last(where: { $0.name == "traceparent" })?.stringValue,
            let context = SpanContext(traceparent: parent)
        else { return nil }
        traceparent = parent.utf8.count == 55 && parent.hasPrefix("00-") ? parent : context.traceparent
        self.parent = context
        let state = headers.last(where: { $0.name == "tracestate" })?.stringValue
        tracestate = state.flatMap { Self.isTracestate($0) ? $0 : nil }
    }

    /// A trace of its own (random ids, sampled), for what no consumed message caused: a notification's record
    /// at the receiver, a credit published by the worker's own timer.
    public static func fresh() -> TraceContext {
        TraceContext(parent: SpanContext(traceID: IDWords.traceID(), spanID: IDWords.spanID(), sampled: true))
    }

    private init(parent: SpanContext) {
        self.parent = parent
        traceparent = parent.traceparent
        tracestate = nil
    }

    /// The headers to add to a record published for the message.
    public var headers: [MessageHeader] {
        [MessageHeader(name: "traceparent", string: traceparent)]
            + (tracestate.map { [MessageHeader(name: "tracestate", string: $0)] } ?? [])
    }

    /// Printable ASCII, at most 512 bytes (the specification's limit for what a vendor must propagate).
    static func isTracestate(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return !bytes.isEmpty && bytes.count <= 512 && bytes.allSatisfy { (0x20...0x7e).contains($0) }
    }
}
