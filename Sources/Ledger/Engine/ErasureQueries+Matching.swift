import Foundation

/// How the erasure finds and reads the texts that may name a player: an identifier as the audit's JSON holds it,
/// matched literally by LIKE on both ledgers, and a stored document's members.
extension ErasureQueries {
    /// An identifier as a JSON text of the audit may hold it: as it is, and with JSON's escapes (`"` and `\` always,
    /// `/` by the writers that escape it).
    static func storedForms(of identifier: String) -> [String] {
        let escaped = identifier.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "\"", with: "\\\"")
        return [identifier, escaped, escaped.replacingOccurrences(of: "/", with: "\\/")]
    }

    /// `text` matched by LIKE as it is, on both ledgers (`ESCAPE '!'`: PostgreSQL takes `\` as LIKE's escape
    /// otherwise, SQLite none; `%` and `_` are wildcards in both).
    static func likeLiteral(_ text: String) -> String {
        // By scalar: a `!` followed by a combining mark is one Character, and must still be escaped.
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar == "!" || scalar == "%" || scalar == "_" { out.append("!") }
            out.append(scalar)
        }
        return String(out)
    }

    /// A string member of a JSON document, nil when absent or not JSON.
    static func member(_ name: String, of bytes: [UInt8]?) -> String? { members(of: bytes)[name] as? String }

    /// A JSON document's members, none when it is not a JSON object.
    static func members(of bytes: [UInt8]?) -> [String: Any] {
        guard let bytes, let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
            return [:]
        }
        return object
    }
}
