import Foundation
import Vocabulary

/// The members of a JSON object as raw byte spans, read in one pass without building a tree. Two readers use
/// it:
/// - the job parser, to refuse what Foundation's parsers would read two ways: a key given twice (one parser
///   keeps the first value, another the last; `"quantit\u0079"` is the same key written differently), and
///   numbers whose text is not a plain integer (`1.0`, `1e2`, which decoders turn into integers silently);
/// - the signed payloads' decoders (`JSONField`, SignedPayloadDecoding.swift), where JSONDecoder cost a
///   tenth of the notification receiver's time.
///
/// The whole text is checked against JSON's grammar (strings without raw control characters, numbers,
/// `true`/`false`/`null`, nesting); nesting is bounded, so hostile depth cannot exhaust the stack.
package enum JSONObjectScanner {
    package struct Member {
        package let key: String
        /// The value's bytes exactly as written (`"text"`, `12`, `{...}`).
        package let raw: ArraySlice<UInt8>
    }

    package static let maximumDepth = 64
    /// As many members as a job's or Apple's objects have, or a few more: up to this many, found by walking them.
    package static let fewMembers = 16

    /// The members in order, or nil when `bytes` is not one JSON object.
    package static func members(_ bytes: [UInt8]) -> [Member]? { members(bytes[...]) }

    /// The members in order, or nil when `bytes` is not one JSON object (a member's `raw` of an enclosing
    /// object is read this way without a copy).
    package static func members(_ bytes: ArraySlice<UInt8>) -> [Member]? {
        var index = bytes.startIndex
        skipSpace(bytes, &index)
        guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        var members: [Member] = []
        members.reserveCapacity(16)  // Apple's objects: grown once, not five times from one member
        skipSpace(bytes, &index)
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return trailingSpaceOnly(bytes, index) ? members : nil
        }
        while true {
            skipSpace(bytes, &index)
            let keyStart = index
            guard skipString(bytes, &index), let key = JSONStringToken.text(bytes[keyStart..<index]) else { return nil }
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

    /// The first key given again in `members` (at its second place), or nil when every key is given once. A few
    /// members (a job's, Apple's objects) are each compared with those before them, which costs less than a set's
    /// table and a hash of every key; an object of thousands of members (a hostile one) takes the set.
    package static func repeatedKey(_ members: [Member]) -> String? {
        guard members.count > fewMembers else {
            for index in members.indices where members[..<index].contains(where: { $0.key == members[index].key }) {
                return members[index].key
            }
            return nil
        }
        var keys = Set<String>(minimumCapacity: members.count)
        return members.first { !keys.insert($0.key).inserted }?.key
    }

    /// The elements of a JSON array as raw byte spans (`raw` of a member, as written), or nil when `raw` is
    /// not one array.
    package static func elements(_ raw: ArraySlice<UInt8>) -> [ArraySlice<UInt8>]? {
        var index = raw.startIndex
        skipSpace(raw, &index)
        guard index < raw.endIndex, raw[index] == UInt8(ascii: "[") else { return nil }
        index += 1
        var elements: [ArraySlice<UInt8>] = []
        skipSpace(raw, &index)
        if index < raw.endIndex, raw[index] == UInt8(ascii: "]") {
            index += 1
            return trailingSpaceOnly(raw, index) ? elements : nil
        }
        while true {
            skipSpace(raw, &index)
            let start = index
            guard skipValue(raw, &index, depth: 1) else { return nil }
            elements.append(raw[start..<index])
            skipSpace(raw, &index)
            guard index < raw.endIndex else { return nil }
            if raw[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard raw[index] == UInt8(ascii: "]") else { return nil }
            index += 1
            return trailingSpaceOnly(raw, index) ? elements : nil
        }
    }

    /// True when `raw` is a JSON integer written without fraction, exponent or sign (`0`, `12`).
    package static func isPlainInteger(_ raw: ArraySlice<UInt8>) -> Bool {
        !raw.isEmpty && raw.count <= 18 && raw.allSatisfy(isDigit)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    private static func trailingSpaceOnly(_ bytes: ArraySlice<UInt8>, _ index: Int) -> Bool {
        var index = index
        skipSpace(bytes, &index)
        return index == bytes.endIndex
    }

    private static func skipSpace(_ bytes: ArraySlice<UInt8>, _ index: inout Int) {
        while index < bytes.endIndex, isSpace(bytes[index]) { index += 1 }
    }

    /// A string token; a raw control character or an unknown escape inside one is not JSON. Read through a
    /// buffer pointer: a notification's nested JWS is a string of several kilobytes, and the slice's checked
    /// subscript made this loop the scanner's main cost.
    private static func skipString(_ bytes: ArraySlice<UInt8>, _ index: inout Int) -> Bool {
        guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "\"") else { return false }
        index += 1
        let base = bytes.startIndex
        var offset = index - base
        let closed = bytes.withUnsafeBufferPointer { buffer -> Bool in
            while offset < buffer.count {
                offset = JSONTextScan.firstSpecial(in: buffer, from: offset)
                guard offset < buffer.count else { return false }
                let byte = buffer[offset]
                if byte == UInt8(ascii: "\"") {
                    offset += 1
                    return true
                }
                guard byte == UInt8(ascii: "\\") else { return false }  // a raw control character
                var escape = base + offset
                guard skipEscape(bytes, &escape) else { return false }
                offset = escape - base
            }
            return false
        }
        index = base + offset
        return closed
    }

    /// A backslash and what follows it: one of `"\/bfnrt`, or `u` and four hexadecimal digits.
    private static func skipEscape(_ bytes: ArraySlice<UInt8>, _ index: inout Int) -> Bool {
        index += 1
        guard index < bytes.endIndex else { return false }
        let escaped = bytes[index]
        index += 1
        switch escaped {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return true
        case UInt8(ascii: "u"):
            guard bytes.endIndex - index >= 4, bytes[index..<index + 4].allSatisfy(isHexDigit) else { return false }
            index += 4
            return true
        default:
            return false
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }

    private static func skipValue(_ bytes: ArraySlice<UInt8>, _ index: inout Int, depth: Int) -> Bool {
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
        case UInt8(ascii: "t"): return skipLiteral("true", bytes, &index)
        case UInt8(ascii: "f"): return skipLiteral("false", bytes, &index)
        case UInt8(ascii: "n"): return skipLiteral("null", bytes, &index)
        default: return skipNumber(bytes, &index)
        }
    }

    private static func skipLiteral(_ literal: StaticString, _ bytes: ArraySlice<UInt8>, _ index: inout Int) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.endIndex - index >= count else { return false }
        let matches = literal.withUTF8Buffer { bytes[index..<index + count].elementsEqual($0) }
        index += count
        return matches
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    private static func skipNumber(_ bytes: ArraySlice<UInt8>, _ index: inout Int) -> Bool {
        func digits() -> Int {
            let start = index
            while index < bytes.endIndex, isDigit(bytes[index]) { index += 1 }
            return index - start
        }
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.endIndex, isDigit(bytes[index]) else { return false }
        if bytes[index] == UInt8(ascii: "0") { index += 1 } else { _ = digits() }
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { return false }
        }
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.endIndex, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard digits() > 0 else { return false }
        }
        return true
    }
}
