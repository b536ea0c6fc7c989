import Foundation
import Synchronization

/// A span's identity as W3C Trace Context carries it: a 16-byte trace id, an 8-byte span id, and whether the
/// trace is sampled (recorded).
public struct SpanContext: Sendable, Equatable {
    public let traceID: [UInt8]
    public let spanID: [UInt8]
    public let sampled: Bool

    public init(traceID: [UInt8], spanID: [UInt8], sampled: Bool) {
        self.traceID = traceID
        self.spanID = spanID
        self.sampled = sampled
    }

    /// The context a `traceparent` of version `00` carries (or a later version's first fields); nil for a malformed
    /// one, or ids of all zeros.
    public init?(traceparent text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, parts[0] != "ff", let trace = Self.bytes(parts[1], count: 16),
            let span = Self.bytes(parts[2], count: 8), let flags = Self.bytes(parts[3], count: 1),
            trace.contains(where: { $0 != 0 }), span.contains(where: { $0 != 0 })
        else { return nil }
        self.init(traceID: trace, spanID: span, sampled: flags[0] & 1 == 1)
    }

    /// `00-<trace id>-<span id>-<01|00>`: the header a record carries so that its consumer's span is this one's child.
    public var traceparent: String {
        "00-\(Self.hex(traceID))-\(Self.hex(spanID))-\(sampled ? "01" : "00")"
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    private static func bytes(_ text: Substring, count: Int) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count == count * 2 else { return nil }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 48...57: byte - 48
            case 97...102: byte - 87
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(count)
        for index in stride(from: 0, to: utf8.count, by: 2) {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            out.append(high << 4 | low)
        }
        return out
    }
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
    public var parentSpanID: [UInt8]?
    /// Nanoseconds since the epoch.
    public var start: UInt64
    public var end: UInt64
    public var attributes: [(String, SpanValue)]
    /// Why it failed (the span's status is an error), or nil.
    public var error: String?
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
        recording.withLock { $0?.error = String(reason.prefix(256)) }
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
        var generator = SystemRandomNumberGenerator()
        let traceID = parent?.traceID ?? Self.randomID(16, &generator)
        let sampled = parent?.sampled ?? (Double.random(in: 0..<1, using: &generator) < sampleRatio)
        let context = SpanContext(traceID: traceID, spanID: Self.randomID(8, &generator), sampled: sampled)
        let started = sampled ? Self.nanoseconds() : 0
        return Span(
            FinishedSpan(
                name: name, kind: kind, context: context, parentSpanID: parent?.spanID, start: started, end: started,
                attributes: sampled ? attributes : [], error: nil), tracer: self)
    }

    static func randomID(_ count: Int, _ generator: inout SystemRandomNumberGenerator) -> [UInt8] {
        var id = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
        if id.allSatisfy({ $0 == 0 }) { id[count - 1] = 1 }
        return id
    }

    static func nanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
