/// Lower-case hexadecimal, two digits a byte: ids on the wire (trace and span ids, stable event ids, digests). The
/// one encoder and decoder of it here.
public enum Hex {
    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// `bytes` as lower-case hex. By table: `String(format:)` cost 6 % of the worker's CPU when ids were made so.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of hex text; nil for an odd count or a character that is not a hex digit. `lowercaseOnly`: refuse
    /// upper-case digits too (W3C Trace Context allows lower case only).
    public static func decode(_ utf8: some Collection<UInt8>, lowercaseOnly: Bool = false) -> [UInt8]? {
        guard utf8.count % 2 == 0 else { return nil }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 48...57: byte - 48
            case 97...102: byte - 87
            case 65...70 where !lowercaseOnly: byte - 55
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var high: UInt8? = nil
        for byte in utf8 {
            guard let value = nibble(byte) else { return nil }
            if let first = high {
                out.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return out
    }
}
