/// A minimal ASN.1 BER/DER reader: enough for Apple's app receipt payload (a SET of SEQUENCE{INTEGER type,
/// INTEGER version, OCTET STRING value}). Definite and indefinite lengths; single-byte tags.
///
/// The bytes are the receipt's, so hostile: every length is checked against what is left before it is used,
/// and indefinite lengths, found by reading the elements inside them, nest at most ``maximumDepth`` deep
/// (each level is a recursion, and a receipt of nested `30 80` would otherwise exhaust the stack).
struct ASN1Reader {
    struct Element {
        let tag: UInt8
        let content: ArraySlice<UInt8>
    }

    /// Indefinite-length elements inside indefinite-length elements. Xcode's receipts use two or three.
    static let maximumDepth = 16

    private let bytes: ArraySlice<UInt8>
    private var offset: Int  // an index of `bytes`, which need not start at 0
    private let depth: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.init(bytes, depth: 0)
    }

    private init(_ bytes: ArraySlice<UInt8>, depth: Int) {
        self.bytes = bytes
        self.offset = bytes.startIndex
        self.depth = depth
    }

    var isAtEnd: Bool {
        bytes.endIndex - offset < 2 ? offset >= bytes.endIndex : bytes[offset] == 0 && bytes[offset + 1] == 0
    }

    mutating func next() -> Element? {
        let end = bytes.endIndex
        guard end - offset >= 2 else { return nil }
        let tag = bytes[offset]
        guard tag & 0x1F != 0x1F else { return nil }  // multi-byte tags do not occur in receipts
        var cursor = offset + 1
        let first = bytes[cursor]
        cursor += 1
        if first == 0x80 {  // indefinite length: content runs to the matching end-of-contents
            guard depth < Self.maximumDepth, let contentEnd = endOfContents(from: cursor) else { return nil }
            offset = contentEnd + 2
            return Element(tag: tag, content: bytes[cursor..<contentEnd])
        }
        var length = Int(first)
        if first & 0x80 != 0 {
            let count = Int(first & 0x7F)
            guard count <= 4, end - cursor >= count else { return nil }  // 4 bytes: at most 2^32 - 1
            length = 0
            for _ in 0..<count {
                length = length << 8 | Int(bytes[cursor])
                cursor += 1
            }
        }
        guard end - cursor >= length else { return nil }
        offset = cursor + length
        return Element(tag: tag, content: bytes[cursor..<offset])
    }

    /// The index of the end-of-contents octets closing an indefinite-length element whose content starts
    /// at `start`, or nil when they are missing or the nesting is too deep.
    private func endOfContents(from start: Int) -> Int? {
        var reader = ASN1Reader(bytes[start...], depth: depth + 1)
        while true {
            if bytes.endIndex - reader.offset >= 2, bytes[reader.offset] == 0, bytes[reader.offset + 1] == 0 {
                return reader.offset
            }
            guard reader.next() != nil else { return nil }
        }
    }

    /// A signed INTEGER of at most 8 bytes; nil when empty or longer.
    static func integer(_ content: ArraySlice<UInt8>) -> Int? {
        guard let first = content.first, content.count <= 8 else { return nil }
        var value = Int(Int8(bitPattern: first))  // sign-extend
        for byte in content.dropFirst() { value = value << 8 | Int(byte) }  // `<<` drops bits, it never traps
        return value
    }

    /// The text of a UTF8String or IA5String element.
    static func string(_ content: ArraySlice<UInt8>) -> String? {
        var reader = ASN1Reader(content)
        guard let element = reader.next(), element.tag == 0x0C || element.tag == 0x16 else { return nil }
        return String(decoding: element.content, as: UTF8.self)
    }
}
