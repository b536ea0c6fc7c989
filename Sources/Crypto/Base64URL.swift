public import Foundation

/// Base64url (RFC 4648 §5) without padding, as JWS and JWT use it. Decoding is table-driven over UTF-8:
/// it sits on the hot path of every signed-transaction verification.
public enum Base64URL {
    private static let table: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8.enumerated() {
            table[Int(byte)] = UInt8(index)
        }
        return table
    }()

    /// Nil when a character is outside the alphabet or the length cannot be base64url.
    package static func decode(_ text: Substring) -> Data? {
        decodeBytes(text).map { Data($0) }
    }

    /// As `decode`, into an array (what the JSON scanner reads).
    public static func decodeBytes(_ text: Substring) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decodeBytes($0) }
    }

    /// Four characters at a time into three bytes (the tail: two characters into one, three into two).
    package static func decodeBytes(_ input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let tail = input.count % 4
        guard tail != 1 else { return nil }
        let count = input.count / 4 * 3 + max(0, tail - 1)
        var valid = true
        let output = [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
            table.withUnsafeBufferPointer { table in
                var read = 0
                var written = 0
                // 0xFF marks a byte outside the alphabet: OR-ing the four values shows one at once.
                func value(_ offset: Int) -> UInt32 { UInt32(table[Int(input[read + offset])]) }
                while read + 4 <= input.count {
                    let a = value(0), b = value(1), c = value(2), d = value(3)
                    guard (a | b | c | d) & 0x80 == 0 else {
                        valid = false
                        return
                    }
                    let word = a << 18 | b << 12 | c << 6 | d
                    out[written] = UInt8(truncatingIfNeeded: word >> 16)
                    out[written + 1] = UInt8(truncatingIfNeeded: word >> 8)
                    out[written + 2] = UInt8(truncatingIfNeeded: word)
                    read += 4
                    written += 3
                }
                if tail > 0 {
                    let a = value(0), b = value(1), c = tail == 3 ? value(2) : 0
                    guard (a | b | c) & 0x80 == 0 else {
                        valid = false
                        return
                    }
                    let word = a << 18 | b << 12 | c << 6
                    out[written] = UInt8(truncatingIfNeeded: word >> 16)
                    if tail == 3 { out[written + 1] = UInt8(truncatingIfNeeded: word >> 8) }
                }
            }
            initialized = valid ? count : 0
        }
        return valid ? output : nil
    }

    public static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
