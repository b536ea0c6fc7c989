import Foundation
import Synchronization
import Vocabulary

/// A span's identity as W3C Trace Context carries it: a 16-byte trace id, an 8-byte span id, and whether the
/// trace is sampled (recorded).
public struct SpanContext: Sendable, Equatable {
    public let traceID: TraceID
    public let spanID: SpanID
    public let sampled: Bool

    public init(traceID: TraceID, spanID: SpanID, sampled: Bool) {
        self.traceID = traceID
        self.spanID = spanID
        self.sampled = sampled
    }

    /// The context a W3C `traceparent` carries, the one parser of it: `<version>-<32 hex trace id>-<16 hex parent
    /// id>-<2 hex flags>`, lower-case hex, ids not all zeros; version `00` exactly that (55 bytes), a later version
    /// (not `ff`) those fields then, optionally, a dash and more (up to 512 bytes), as the specification allows.
    /// Nil for anything else.
    public init?(traceparent text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count >= 55, bytes.count <= 512, bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"),
            bytes[52] == UInt8(ascii: "-"), let version = Self.bytes(bytes[0..<2]), version[0] != 0xFF,
            version[0] == 0 ? bytes.count == 55 : (bytes.count == 55 || bytes[55] == UInt8(ascii: "-")),
            let trace = Self.bytes(bytes[3..<35]), let span = Self.bytes(bytes[36..<52]),
            let flags = Self.bytes(bytes[53..<55]), trace.contains(where: { $0 != 0 }),
            span.contains(where: { $0 != 0 })
        else { return nil }
        self.init(
            traceID: TraceID(high: IDWords.word(trace[0..<8]), low: IDWords.word(trace[8..<16])),
            spanID: SpanID(IDWords.word(span[0..<8])), sampled: flags[0] & 1 == 1)
    }

    /// `00-<trace id>-<span id>-<01|00>`: the header a record carries so that its consumer's span is this one's child.
    public var traceparent: String {
        String(unsafeUninitializedCapacity: 55) { text in
            let digits: StaticString = "0123456789abcdef"
            var at = 0
            func put(_ byte: UInt8) {
                text[at] = byte
                at += 1
            }
            func put(word: UInt64) {
                for shift in stride(from: 60, through: 0, by: -4) {
                    put(digits.utf8Start[Int(word >> UInt64(shift) & 0xF)])
                }
            }
            put(UInt8(ascii: "0"))
            put(UInt8(ascii: "0"))
            put(UInt8(ascii: "-"))
            put(word: traceID.high)
            put(word: traceID.low)
            put(UInt8(ascii: "-"))
            put(word: spanID.value)
            put(UInt8(ascii: "-"))
            put(UInt8(ascii: "0"))
            put(UInt8(ascii: sampled ? "1" : "0"))
            return at
        }
    }

    /// Lower-case hex digits, two a byte.
    private static func bytes(_ utf8: ArraySlice<UInt8>) -> [UInt8]? { Hex.decode(utf8, lowercaseOnly: true) }
}

/// OpenTelemetry's span kinds (their numbers in the protocol).
public enum SpanKind: Int, Sendable {
    case `internal` = 1, server = 2, client = 3, producer = 4, consumer = 5
}

/// An attribute's value.
public enum SpanValue: Sendable, Equatable {
    case string(String)
    case int(Int64)
    case bool(Bool)
}

/// A span once ended: what an exporter sends.
public struct FinishedSpan: Sendable {
    public var name: String
    public var kind: SpanKind
    public var context: SpanContext
    public var parentSpanID: SpanID?
    /// Nanoseconds since the epoch.
    public var start: UInt64
    public var end: UInt64
    public var attributes: [(String, SpanValue)]
    /// Why it failed (the span's status is an error), or nil.
    public var error: String?

    package init(
        name: String, kind: SpanKind, context: SpanContext, parentSpanID: SpanID? = nil, start: UInt64, end: UInt64,
        attributes: [(String, SpanValue)], error: String? = nil
    ) {
        self.name = name
        self.kind = kind
        self.context = context
        self.parentSpanID = parentSpanID
        self.start = start
        self.end = end
        self.attributes = attributes
        self.error = error
    }
}

/// One operation of a trace. A span that is not sampled records nothing and costs next to nothing; its context
/// still carries the trace on.
public final class Span: Sendable {
    public let context: SpanContext
    private let recording: Mutex<FinishedSpan?>
    private let tracer: Tracer

    init(_ finished: FinishedSpan, tracer: Tracer) {
        context = finished.context
        recording = Mutex(finished.context.sampled ? finished : nil)
        self.tracer = tracer
    }

    public func set(_ key: String, _ value: SpanValue) {
        recording.withLock { $0?.attributes.append((key, value)) }
    }

    /// Marks the span failed, with a reason for people (never a receipt, a token or a secret).
    public func fail(_ reason: String) {
        recording.withLock { $0?.error = UTF8Text.prefix(reason, bytes: 256) }
    }

    /// Ends it (once; later calls do nothing) and hands it to the tracer's exporter.
    public func end() {
        let ended = recording.withLock { span -> FinishedSpan? in
            defer { span = nil }
            span?.end = Tracer.nanoseconds()
            return span
        }
        if let ended { tracer.export(ended) }
    }

    /// Runs `body` in a child of this span, ended when it returns and failed (with the error's text) when it throws.
    /// The child is ``current`` while `body` runs, so what `body` calls adds its spans under it.
    public func inChild<T>(
        _ name: String, kind: SpanKind, attributes: [(String, SpanValue)] = [], _ body: () async throws -> T
    ) async rethrows -> T {
        try await child(name, kind: kind, attributes: attributes).run(body)
    }

    /// Runs `body` with this span ``current``, then ends it (failed, with the error's text, when `body` throws).
    public func run<T>(_ body: () async throws -> T) async rethrows -> T {
        do {
            let result = try await Span.$current.withValue(self) { try await body() }
            end()
            return result
        } catch {
            fail("\(error)")
            end()
            throw error
        }
    }

    /// The span of what the task is doing now (a message's `process` span, a chore's round, a call inside one),
    /// bound by whoever started it: a layer deep in a call (the HTTP client, the ledger) adds its span under it
    /// without a context passed down by hand.
    @TaskLocal public static var current: Span?

    /// Runs `body` in a child of ``current`` when there is one and it is recorded; otherwise just runs it (an
    /// unrecorded trace gains nothing from a child, and a span's cost is saved).
    public static func inCurrentChild<T>(
        _ name: String, kind: SpanKind, attributes: [(String, SpanValue)] = [], _ body: () async throws -> T
    ) async rethrows -> T {
        guard let current, current.context.sampled else { return try await body() }
        return try await current.inChild(name, kind: kind, attributes: attributes, body)
    }

    /// A child of this span.
    public func child(_ name: String, kind: SpanKind, attributes: [(String, SpanValue)] = []) -> Span {
        tracer.start(name, kind: kind, parent: context, attributes: attributes)
    }
}

/// Makes spans and hands the ended ones to an exporter. Parent-based sampling: a span with a parent is sampled as
/// the parent is (a sampled job's trace is recorded whole; a caller that does not sample keeps its choice), a
/// root by `sampleRatio`.
public final class Tracer: Sendable {
    let sampleRatio: Double
    let export: @Sendable (FinishedSpan) -> Void

    public init(sampleRatio: Double, export: @escaping @Sendable (FinishedSpan) -> Void) {
        self.sampleRatio = min(max(sampleRatio, 0), 1)
        self.export = export
    }

    public func start(_ name: String, kind: SpanKind, parent: SpanContext?, attributes: [(String, SpanValue)] = [])
        -> Span
    {
        let sampled = parent?.sampled ?? (sampleRatio >= 1 || (sampleRatio > 0 && IDWords.unit() < sampleRatio))
        return make(name, kind: kind, parent: parent, sampled: sampled, attributes: attributes)
    }

    /// The root span of the trace `traceID` a producer named and recorded nothing of (a notification's record at
    /// the receiver): recorded by `sampleRatio`, whatever the producer's flag said, decided by the trace id (as
    /// OpenTelemetry's TraceIdRatioBased sampler does), so that a record handled twice is decided the same way.
    public func start(
        _ name: String, kind: SpanKind, rootOf traceID: TraceID, attributes: [(String, SpanValue)] = []
    ) -> Span {
        let share = Double(traceID.low >> 11) / Double(UInt64(1) << 53)
        let sampled = sampleRatio >= 1 || share < sampleRatio
        return make(name, kind: kind, parent: nil, traceID: traceID, sampled: sampled, attributes: attributes)
    }

    /// A root span recorded whatever the ratio: for what runs a few times a minute (a chore's round), whose every
    /// trace is worth its cost.
    public func startRecorded(_ name: String, kind: SpanKind = .internal, attributes: [(String, SpanValue)] = [])
        -> Span
    {
        make(name, kind: kind, parent: nil, sampled: true, attributes: attributes)
    }

    private func make(
        _ name: String, kind: SpanKind, parent: SpanContext?, traceID: TraceID? = nil, sampled: Bool,
        attributes: [(String, SpanValue)]
    ) -> Span {
        let context = SpanContext(
            traceID: parent?.traceID ?? traceID ?? IDWords.traceID(), spanID: IDWords.spanID(), sampled: sampled)
        let started = sampled ? Self.nanoseconds() : 0
        return Span(
            FinishedSpan(
                name: name, kind: kind, context: context, parentSpanID: parent?.spanID, start: started, end: started,
                attributes: sampled ? attributes : [], error: nil), tracer: self)
    }

    static func nanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
