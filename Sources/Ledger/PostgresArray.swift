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
            for character in value.unicodeScalars {
                if character == "\"" || character == "\\" { out += "\\" }
                out.unicodeScalars.append(character)
            }
            out += "\""
        }
        return out + "}"
    }

    static func literal(_ values: [String]) -> String { literal(values.map(Optional.some)) }
}
