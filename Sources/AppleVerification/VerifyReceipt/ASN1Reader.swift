/// A minimal ASN.1 BER/DER reader: enough for Apple's app receipt payload (a SET of SEQUENCE{INTEGER type,
/// INTEGER version, OCTET STRING value}). Definite and indefinite lengths; single-byte tags.
struct ASN1Reader {
    struct Element {
        let tag: UInt8
        let content: ArraySlice<UInt8>
    }

    private let bytes: [UInt8]
    private var offset: Int
    private let end: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = Array(bytes)
        self.offset = 0
        self.end = self.bytes.count
    }

    var isAtEnd: Bool { offset >= end || (end - offset >= 2 && bytes[offset] == 0 && bytes[offset + 1] == 0) }

    mutating func next() -> Element? {
        guard offset + 2 <= end else { return nil }
        let tag = bytes[offset]
        guard tag & 0x1F != 0x1F else { return nil }  // multi-byte tags do not occur in receipts
        var cursor = offset + 1
        let first = bytes[cursor]
        cursor += 1
        if first == 0x80 {  // indefinite length: content runs to the matching end-of-contents
            guard let contentEnd = Self.endOfContents(bytes, from: cursor, limit: end) else { return nil }
            offset = contentEnd + 2
            return Element(tag: tag, content: bytes[cursor..<contentEnd])
        }
        var length = Int(first)
        if first & 0x80 != 0 {
            let count = Int(first & 0x7F)
            guard count <= 4, cursor + count <= end else { return nil }
            length = 0
            for _ in 0..<count {
                length = length << 8 | Int(bytes[cursor])
                cursor += 1
            }
        }
        guard length >= 0, cursor + length <= end else { return nil }
        offset = cursor + length
        return Element(tag: tag, content: bytes[cursor..<(cursor + length)])
    }

    /// The index of the end-of-contents octets closing an indefinite-length element that starts at `from`.
    private static func endOfContents(_ bytes: [UInt8], from start: Int, limit: Int) -> Int? {
        var reader = ASN1Reader(bytes[start..<limit])
        while true {
            if reader.offset + 2 <= reader.end, bytes[start + reader.offset] == 0, bytes[start + reader.offset + 1] == 0
            {
                return start + reader.offset
            }
            guard reader.next() != nil else { return nil }
        }
    }

    static func integer(_ content: ArraySlice<UInt8>) -> Int? {
        guard !content.isEmpty, content.count <= 8 else { return nil }
        var value = Int(Int8(bitPattern: content.first!))  // sign-extend
        for byte in content.dropFirst() { value = value << 8 | Int(byte) }
        return value
    }

    /// The text of a UTF8String or IA5String element.
    static func string(_ content: ArraySlice<UInt8>) -> String? {
        var reader = ASN1Reader(content)
        guard let element = reader.next(), element.tag == 0x0C || element.tag == 0x16 else { return nil }
        return String(decoding: element.content, as: UTF8.self)
    }
}
