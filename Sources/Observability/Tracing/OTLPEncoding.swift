/// Spans as OTLP's `ExportTraceServiceRequest` in protobuf's wire format (opentelemetry/proto/collector/trace/v1):
/// the body of an OTLP/HTTP export (`Content-Type: application/x-protobuf`). Written by hand: the message is
/// small and fixed, and no protobuf package can be fetched here.
public enum OTLPEncoding {
    /// One request: the resource (`service.name`, `service.version`, then `resource`'s other attributes), one
    /// instrumentation scope, the spans.
    public static func exportRequest(
        _ spans: [FinishedSpan], service: String, version: String, resource: [(String, String)] = []
    ) -> [UInt8] {
        var attributes = ProtoWriter()
        attributes.message(1, keyValue("service.name", .string(service)))
        attributes.message(1, keyValue("service.version", .string(version)))
        for (key, value) in resource where key != "service.name" && key != "service.version" {
            attributes.message(1, keyValue(key, .string(value)))
        }
        var scope = ProtoWriter()
        scope.string(1, "receipt-worker")
        scope.string(2, version)
        var scopeSpans = ProtoWriter()
        scopeSpans.message(1, scope.bytes)
        for span in spans { scopeSpans.message(2, encode(span)) }
        var resourceSpans = ProtoWriter()
        resourceSpans.message(1, attributes.bytes)
        resourceSpans.message(2, scopeSpans.bytes)
        var request = ProtoWriter()
        request.message(1, resourceSpans.bytes)
        return request.bytes
    }

    static func encode(_ span: FinishedSpan) -> [UInt8] {
        var out = ProtoWriter()
        out.words(1, span.context.traceID.high, span.context.traceID.low)
        out.words(2, span.context.spanID.value)
        if let parent = span.parentSpanID { out.words(4, parent.value) }
        out.string(5, span.name)
        out.varint(6, UInt64(span.kind.rawValue))
        out.fixed64(7, span.start)
        out.fixed64(8, span.end)
        for (key, value) in span.attributes { out.message(9, keyValue(key, value)) }
        var status = ProtoWriter()
        if let error = span.error {
            status.string(2, error)
            status.varint(3, 2)  // STATUS_CODE_ERROR
        }
        out.message(15, status.bytes)
        out.fixed32(16, span.context.sampled ? 1 : 0)  // W3C trace flags: sampled
        return out.bytes
    }

    static func keyValue(_ key: String, _ value: SpanValue) -> [UInt8] {
        var any = ProtoWriter()
        switch value {
        case .string(let text): any.string(1, text)
        case .bool(let flag): any.varint(2, flag ? 1 : 0)
        case .int(let number): any.varint(3, UInt64(bitPattern: number))
        }
        var pair = ProtoWriter()
        pair.string(1, key)
        pair.message(2, any.bytes)
        return pair.bytes
    }
}

/// Protobuf's wire format, the few field kinds OTLP's spans need.
struct ProtoWriter {
    private(set) var bytes: [UInt8] = []

    private mutating func tag(_ field: Int, _ wireType: UInt8) { raw(UInt64(field) << 3 | UInt64(wireType)) }

    private mutating func raw(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func varint(_ field: Int, _ value: UInt64) {
        tag(field, 0)
        raw(value)
    }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        tag(field, 1)
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    mutating func fixed32(_ field: Int, _ value: UInt32) {
        tag(field, 5)
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    mutating func bytes(_ field: Int, _ value: [UInt8]) {
        tag(field, 2)
        raw(UInt64(value.count))
        bytes += value
    }

    mutating func string(_ field: Int, _ value: String) {
        tag(field, 2)
        raw(UInt64(value.utf8.count))
        bytes += value.utf8
    }

    /// An id of one or two big-endian words as a `bytes` field (8 or 16 bytes), without an array of its own.
    mutating func words(_ field: Int, _ first: UInt64, _ second: UInt64? = nil) {
        tag(field, 2)
        raw(second == nil ? 8 : 16)
        append(word: first)
        if let second { append(word: second) }
    }

    private mutating func append(word: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift)))
        }
    }

    mutating func message(_ field: Int, _ value: [UInt8]) { bytes(field, value) }
}
