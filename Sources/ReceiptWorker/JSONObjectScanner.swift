import Foundation

/// The top-level members of a JSON object as raw byte spans, read once, so that the job parser can refuse
/// what Foundation's parsers would read two ways: a key given twice (one parser keeps the first value,
/// another the last; `"quantit\u0079"` is the same key written differently), and numbers whose text is
/// not a plain integer (`1.0`, `1e2`, which decoders turn into integers silently).
///
/// Only the structure is checked here (strings, nesting, separators); the values are still parsed by
/// Foundation. Nesting is bounded, so hostile depth cannot exhaust the stack.
enum JSONObjectScanner {
    struct Member {
        let key: String
        /// The value's bytes exactly as written (`"text"`, `12`, `{...}`).
        let raw: ArraySlice<UInt8>
    }

    static let maximumDepth = 64

    /// The members in order, or nil when `bytes` is not one JSON object.
    static func members(_ bytes: [UInt8]) -> [Member]? {
        var index = bytes.startIndex
        skipSpace(bytes, &index)
        guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        var members: [Member] = []
        skipSpace(bytes, &index)
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return trailingSpaceOnly(bytes, index) ? members : nil
        }
        while true {
            skipSpace(bytes, &index)
            let keyStart = index
            guard skipString(bytes, &index), let key = decodeString(bytes[keyStart..<index]) else { return nil }
            skipSpace(bytes, &index)
            guard index < bytes.endIndex, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skipSpace(bytes, &index)
            let valueStart = index
            guard skipValue(bytes, &index, depth: 1) else { return nil }
            members.append(Member(key: key, raw: bytes[valueStart..<index]))
            skipSpace(bytes, &index)
            guard index < bytes.endIndex else { return nil }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "}") else { return nil }
            index += 1
            return trailingSpaceOnly(bytes, index) ? members : nil
        }
    }

    /// True when `raw` is a JSON integer written without fraction, exponent or sign (`0`, `12`).
    static func isPlainInteger(_ raw: ArraySlice<UInt8>) -> Bool {
        !raw.isEmpty && raw.count <= 18 && raw.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    private static func trailingSpaceOnly(_ bytes: [UInt8], _ index: Int) -> Bool {
        var index = index
        skipSpace(bytes, &index)
        return index == bytes.endIndex
    }

    private static func skipSpace(_ bytes: [UInt8], _ index: inout Int) {
        while index < bytes.endIndex, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    private static func skipString(_ bytes: [UInt8], _ index: inout Int) -> Bool {
        guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "\"") else { return false }
        index += 1
        while index < bytes.endIndex {
            switch bytes[index] {
            case UInt8(ascii: "\\"): index += 2
            case UInt8(ascii: "\""):
                index += 1
                return true
            default: index += 1
            }
        }
        return false
    }

    private static func skipValue(_ bytes: [UInt8], _ index: inout Int, depth: Int) -> Bool {
        guard index < bytes.endIndex, depth <= maximumDepth else { return false }
        switch bytes[index] {
        case UInt8(ascii: "\""): return skipString(bytes, &index)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            let close = bytes[index] == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
            let isObject = close == UInt8(ascii: "}")
            index += 1
            skipSpace(bytes, &index)
            if index < bytes.endIndex, bytes[index] == close {
                index += 1
                return true
            }
            while true {
                skipSpace(bytes, &index)
                if isObject {
                    guard skipString(bytes, &index) else { return false }
                    skipSpace(bytes, &index)
                    guard index < bytes.endIndex, bytes[index] == UInt8(ascii: ":") else { return false }
                    index += 1
                    skipSpace(bytes, &index)
                }
                guard skipValue(bytes, &index, depth: depth + 1) else { return false }
                skipSpace(bytes, &index)
                guard index < bytes.endIndex else { return false }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == close else { return false }
                index += 1
                return true
            }
        default:
            // A number or a literal: up to the next separator.
            let start = index
            while index < bytes.endIndex,
                ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D].contains(
                    bytes[index])
            {
                index += 1
            }
            return index > start
        }
    }

    /// A JSON string token's text: its bytes when it has no escape (the usual key, read without a parser),
    /// else unescaped by Foundation (so `\u0079` and `y` are the same key).
    static func decodeString(_ token: ArraySlice<UInt8>) -> String? {
        let inner = token.dropFirst().dropLast()
        if !inner.contains(UInt8(ascii: "\\")) { return String(validating: inner, as: UTF8.self) }
        return try? JSONSerialization.jsonObject(with: Data(token), options: [.fragmentsAllowed]) as? String
    }
}
