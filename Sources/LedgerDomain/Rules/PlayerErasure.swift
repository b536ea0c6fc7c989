import Foundation

/// A player erased (GDPR article 17, the CCPA's right to delete), the claims kept: every identifier of the player
/// (their user id, their orders, their app account tokens and the tokens' digests, their jobs' ids) replaced by a
/// keyed pseudonym, the same each time the same player is erased, and free text about them replaced by
/// ``erasedText``. Purchases, transaction ids, amounts and decisions stay: a purchase replayed later is still the
/// purchase the ledger granted (`duplicate_transaction`). The rule alone: which string becomes what. The ledger
/// applies it to the rows that name the player; the pseudonyms are made by the caller, with the studio's key.
public struct PlayerErasure: Sendable {
    /// The player's pseudonym (their user id's).
    public let pseudonym: String
    /// Every identifier of the player and its pseudonym.
    public let replacements: [String: String]

    /// What free text about the player becomes.
    public static let erasedText = "(erased)"

    /// The fields that hold free text in the player's own records, erased whatever they say: an event's
    /// `credit_reason` (what support typed); a support request's `reason` and an answer's `note`, `cases` and
    /// `summary` (which name the player's orders in words). An event's `reason` is a decision's, and stays.
    public static let eventFreeText: Set<String> = ["credit_reason"]
    public static let supportFreeText: Set<String> = ["reason", "credit_reason", "note", "cases", "summary"]

    public init(pseudonym: String, replacements: [String: String]) {
        self.pseudonym = pseudonym
        self.replacements = replacements
    }

    /// A string as it is kept after the erasure: an identifier's pseudonym; text that names an identifier (as a
    /// word of its own) erased; in the player's own records, the fields of `freeText` erased whatever they say.
    public func string(_ text: String, key: String?, freeText: Set<String> = []) -> String {
        if let pseudonym = replacements[text] { return pseudonym }
        if let key, freeText.contains(key), !text.isEmpty { return Self.erasedText }
        return names(text) ? Self.erasedText : text
    }

    /// Whether `text` names one of the player's identifiers as a word of its own (not inside a longer id:
    /// `player-1` is not in `player-10`).
    public func names(_ text: String) -> Bool {
        replacements.keys.contains { identifier in
            var searchRange = text.startIndex..<text.endIndex
            while let found = text.range(of: identifier, range: searchRange) {
                let before = found.lowerBound == text.startIndex ? nil : text[text.index(before: found.lowerBound)]
                let after = found.upperBound == text.endIndex ? nil : text[found.upperBound]
                if !Self.isWordCharacter(before) && !Self.isWordCharacter(after) { return true }
                searchRange = text.index(after: found.lowerBound)..<text.endIndex
            }
            return false
        }
    }

    private static func isWordCharacter(_ character: Character?) -> Bool {
        guard let character else { return false }
        return character.isLetter || character.isNumber || character == "_" || character == "-"
    }

    /// A JSON document (a stored event, an audit line's request or answer) with each string value rewritten by
    /// ``string(_:key:freeText:)``; keys, numbers, layout and every other byte kept as they were. Text that is
    /// not JSON is rewritten as one string.
    public func json(_ bytes: [UInt8], freeText: Set<String> = []) -> [UInt8] {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        guard bytes.contains(where: { $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: "[") }) else {
            return Array(string(String(decoding: bytes, as: UTF8.self), key: nil).utf8)
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        var key: String?
        while index < bytes.count {
            guard bytes[index] == quote else {
                out.append(bytes[index])
                index += 1
                continue
            }
            var end = index + 1
            while end < bytes.count && bytes[end] != quote { end += bytes[end] == backslash ? 2 : 1 }
            guard end < bytes.count else {
                out += bytes[index...]  // unterminated: kept as it was
                break
            }
            let token = Array(bytes[index...end])
            var next = end + 1
            while next < bytes.count && [0x20, 0x09, 0x0A, 0x0D].contains(bytes[next]) { next += 1 }
            let text = Self.decoded(token)
            if next < bytes.count && bytes[next] == UInt8(ascii: ":") {
                key = text
                out += token
            } else if let text, case let rewritten = string(text, key: key, freeText: freeText), rewritten != text {
                out += Self.encoded(rewritten)
            } else {
                out += token
            }
            index = end + 1
        }
        return out
    }

    /// ``json(_:freeText:)`` of text (an audit line's request or answer, kept as text).
    public func text(_ text: String, freeText: Set<String> = []) -> String {
        String(decoding: json(Array(text.utf8), freeText: freeText), as: UTF8.self)
    }

    private static func decoded(_ token: [UInt8]) -> String? {
        let inner = token.dropFirst().dropLast()
        if !inner.contains(UInt8(ascii: "\\")) { return String(validating: inner, as: UTF8.self) }
        return (try? JSONSerialization.jsonObject(with: Data(token), options: .fragmentsAllowed)) as? String
    }

    private static func encoded(_ text: String) -> [UInt8] {
        (try? JSONSerialization.data(withJSONObject: text, options: .fragmentsAllowed)).map(Array.init)
            ?? Array("\"\(erasedText)\"".utf8)
    }
}
