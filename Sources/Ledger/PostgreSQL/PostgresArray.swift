/// PostgreSQL array literals for text parameters (`$1::text[]`): every element quoted, `"` and `\` escaped,
/// nil as NULL. One parameter carries a whole batch.
enum PostgresArray {
    static func literal(_ values: [String?]) -> String {
        var out = "{"
        out.reserveCapacity(values.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (index, value) in values.enumerated() {
            if index > 0 { out += "," }
            guard let value else {
                out += "NULL"
                continue
            }
            out += "\""
            if value.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                // Escaping byte by byte is safe in UTF-8: neither byte occurs inside a multi-byte sequence.
                var bytes: [UInt8] = []
                bytes.reserveCapacity(value.utf8.count + 16)
                for byte in value.utf8 {
                    if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
                    bytes.append(byte)
                }
                out += String(decoding: bytes, as: UTF8.self)
            } else {
                out += value  // the common case, ids and the like: no escape, one append
            }
            out += "\""
        }
        return out + "}"
    }

    static func literal(_ values: [String]) -> String { literal(values.map(Optional.some)) }
}
