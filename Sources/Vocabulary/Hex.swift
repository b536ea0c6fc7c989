/// Lower-case hexadecimal, two digits a byte: ids on the wire (trace and span ids, stable event ids, digests). The
/// one encoder and decoder of it here.
public enum Hex {
    /// `bytes` as lower-case hex. Written straight into the string's storage: this runs several times a job (its
    /// fingerprint, stable event ids, trace ids), and a generic append a digit at a time cost a few microseconds.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        if let hex = bytes.withContiguousStorageIfAvailable({ encode(UnsafeRawBufferPointer($0)) }) { return hex }
        return Array(bytes).withUnsafeBytes { encode($0) }
    }

    /// `bytes` as lower-case hex.
    public static func encode(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { text in
            let digits: StaticString = "0123456789abcdef"
            let table = digits.utf8Start
            for (index, byte) in bytes.enumerated() {
                text[2 * index] = table[Int(byte >> 4)]
                text[2 * index + 1] = table[Int(byte & 0x0F)]
            }
            return bytes.count * 2
        }
    }

    /// The first 16 of `bytes` as a UUID's text: lower-case hex, dashes after the 4th, 6th, 8th and 10th byte
    /// (8-4-4-4-12 digits). The one place ids of the UUID shape are spelled (stable event ids, time-ordered ids).
    public static func uuid(_ bytes: UnsafeRawBufferPointer) -> String {
        precondition(bytes.count >= 16, "a UUID is 16 bytes")
        return String(unsafeUninitializedCapacity: 36) { text in
            let digits: StaticString = "0123456789abcdef"
            let table = digits.utf8Start
            var written = 0
            for (index, byte) in bytes.prefix(16).enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    text[written] = UInt8(ascii: "-")
                    written += 1
                }
                text[written] = table[Int(byte >> 4)]
                text[written + 1] = table[Int(byte & 0x0F)]
                written += 2
            }
            return written
        }
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
