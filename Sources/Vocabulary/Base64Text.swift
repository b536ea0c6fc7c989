/// Base64 as encoders write it, checked in place.
public enum Base64Text {
    /// True when `text` is the base64 alphabet only (`A-Z a-z 0-9 + /`), a multiple of four long, ended by at most
    /// two `=`. Every such text is one Foundation's decoder accepts (which also skips characters it does not know):
    /// a job's receipt is checked this way first and decoded only when it is not plain, instead of decoding its
    /// kilobytes to throw them away.
    public static func isPlain(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard bytes.count % 4 == 0 else { return false }
            var end = bytes.count
            if end > 0, bytes[end - 1] == UInt8(ascii: "=") { end -= 1 }
            if end > 0, bytes[end - 1] == UInt8(ascii: "=") { end -= 1 }
            // One table load a byte, or'ed together without a branch: the loop runs over every byte of a receipt.
            return outsideAlphabet.withUnsafeBufferPointer { table in
                var outside: UInt8 = 0
                for byte in UnsafeBufferPointer(rebasing: bytes[..<end]) { outside |= table[Int(byte)] }
                return outside == 0
            }
        }
    }

    /// 1 for each byte that is not a base64 character.
    private static let outsideAlphabet: [UInt8] = (0...255).map { byte in
        switch UInt8(byte) {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
            0
        default: 1
        }
    }
}
