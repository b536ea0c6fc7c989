/// UTF-8 validation without generics. `String(validating:as:)` is generic and not specialized by the standard
/// library: each call looked up generic metadata at run time, a fifth of the time it took to decode verifyReceipt's
/// answer, whose every key and text value it read.
public enum UTF8Text {
    /// True when the bytes are well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF),
    /// as `String(validating:as:)` accepts them.
    public static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let count = bytes.count
        func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
            index + offset < count && range.contains(bytes[index + offset])
        }
        let base = UnsafeRawPointer(bytes.baseAddress)
        while index < count {
            // Eight ASCII bytes at a time (no high bit set): a receipt's kilobytes of base64 are all ASCII, and were
            // a third of reading a receipt job byte by byte.
            if let base, count - index >= 8,
                base.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 == 0
            {
                index += 8
                continue
            }
            let lead = bytes[index]
            switch lead {
            case 0x00...0x7F:
                index += 1
            case 0xC2...0xDF:
                guard continuation(1) else { return false }
                index += 2
            case 0xE0...0xEF:
                let second: ClosedRange<UInt8> = lead == 0xE0 ? 0xA0...0xBF : lead == 0xED ? 0x80...0x9F : 0x80...0xBF
                guard continuation(1, second), continuation(2) else { return false }
                index += 3
            case 0xF0...0xF4:
                let second: ClosedRange<UInt8> = lead == 0xF0 ? 0x90...0xBF : lead == 0xF4 ? 0x80...0x8F : 0x80...0xBF
                guard continuation(1, second), continuation(2), continuation(3) else { return false }
                index += 4
            default:
                return false
            }
        }
        return true
    }

    /// The string the bytes spell, or nil when they are not UTF-8.
    public static func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        isValid(bytes) ? String(decoding: bytes, as: UTF8.self) : nil
    }

    /// At most `limit` bytes of `text`, cut where a scalar begins: a bound on a diagnostic's text that holds for any
    /// input. A prefix of characters does not: one character may carry thousands of combining marks.
    public static func prefix(_ text: String, bytes limit: Int) -> String {
        let utf8 = text.utf8
        guard utf8.count > limit else { return text }
        var end = utf8.index(utf8.startIndex, offsetBy: max(0, limit))
        while end > utf8.startIndex, UTF8.isContinuation(utf8[end]) { end = utf8.index(before: end) }
        return String(decoding: utf8[..<end], as: UTF8.self)
    }

    public static func string(_ bytes: ArraySlice<UInt8>) -> String? { bytes.withUnsafeBufferPointer(string) }
    public static func string(_ bytes: [UInt8]) -> String? { bytes.withUnsafeBufferPointer(string) }
    public static func isValid(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer(isValid) }
}
