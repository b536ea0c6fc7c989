import Foundation

/// Base64url (RFC 4648 §5) without padding, as JWS and JWT use it. Decoding is table-driven over UTF-8:
/// it sits on the hot path of every signed-transaction verification.
package enum Base64URL {
    private static let table: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8.enumerated() {
            table[Int(byte)] = UInt8(index)
        }
        return table
    }()

    /// Nil when a character is outside the alphabet or the length cannot be base64url.
    package static func decode(_ text: Substring) -> Data? {
        var text = text
        return text.withUTF8 { decode(bytes: $0) }
    }

    package static func decode(bytes input: UnsafeBufferPointer<UInt8>) -> Data? {
        guard input.count % 4 != 1 else { return nil }
        var output = Data(count: input.count * 3 / 4)
        let valid = output.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) -> Bool in
            var accumulator: UInt32 = 0
            var bits = 0
            var written = 0
            for byte in input {
                let value = table[Int(byte)]
                guard value != 0xFF else { return false }
                accumulator = accumulator << 6 | UInt32(value)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    out[written] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                    written += 1
                }
            }
            return true
        }
        return valid ? output : nil
    }

    package static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
