import Foundation
import Vocabulary

/// A player erased (GDPR article 17, the CCPA's right to delete), the claims kept: every identifier of the player
/// (their user id, their orders, their app account tokens and the tokens' digests, their jobs' ids) replaced by a
/// keyed pseudonym, the same each time the same player is erased, and free text about them replaced by
/// ``erasedText``. Purchases, transaction ids, amounts and decisions stay: a purchase replayed later is still the
/// purchase the ledger granted (`duplicate_transaction`). The rule alone: which string becomes what. The ledger
/// applies it to the rows that name the player, learning their identifiers as it reads them (``learn(_:_:)``);
/// the pseudonyms are made by the caller, with the studio's key.
public struct PlayerErasure: Sendable {
    /// The kinds of identifier, each with its own pseudonyms (an order id equal to a user id is still one value).
    public enum Kind: String, Sendable { case user, order, token, job }

    /// The player's user id and pseudonym.
    public let userID: String
    public let pseudonym: String
    /// Every identifier of the player learned so far and its pseudonym.
    public private(set) var replacements: [String: String]
    private let make: @Sendable (Kind, String) -> String
    private let digest: @Sendable (String) -> String

    /// What free text about the player becomes.
    public static let erasedText = "(erased)"

    /// The members that hold an identifier: their value is replaced when it is one of the player's. A member of any
    /// other name keeps an equal value (a transaction id that happens to equal an order id is a transaction id).
    public static let identifierKeys: Set<String> = [
        "user_id", "order_id", "job_id", "app_account_token", "app_account_token_sha256", "player", "requested_for",
    ]
    /// The members that hold free text in the player's own records, erased whatever they say: an event's
    /// `credit_reason` (what support typed); a support request's `reason` and an answer's `note`, `cases`, `summary`
    /// and `not_found` (which name the player's orders in words). An event's `reason` is a decision's, and stays.
    public static let eventFreeText: Set<String> = ["credit_reason"]
    public static let supportFreeText: Set<String> = [
        "reason", "credit_reason", "note", "cases", "summary", "not_found", "refused",
    ]

    /// `pseudonym(kind, value)`: the caller's keyed pseudonym of one identifier; `digest`: the hex SHA-256 the
    /// desk's audit keeps of an app account token (never the token), replaced by the token's pseudonym too.
    public init(
        userID: String, pseudonym: @escaping @Sendable (Kind, String) -> String,
        digest: @escaping @Sendable (String) -> String
    ) {
        self.userID = userID
        self.make = pseudonym
        self.digest = digest
        self.pseudonym = pseudonym(.user, userID)
        replacements = [userID: self.pseudonym]
    }

    /// An identifier of the player, learned from a row that is theirs; the first kind learned for a value wins.
    public mutating func learn(_ kind: Kind, _ value: String?) {
        guard let value, !value.isEmpty, replacements[value] == nil else { return }
        let replaced = make(kind, value)
        replacements[value] = replaced
        if kind == .token { replacements[digest(value)] = replaced }
    }

    /// Whether a document names the player: an identifier member holds one of their identifiers.
    public func isAbout(_ bytes: [UInt8]) -> Bool {
        var found = false
        walk(bytes) { key, text in
            if let key, Self.identifierKeys.contains(key), replacements[text] != nil { found = true }
            return nil
        }
        return found
    }

    /// Whether any text of a document names the player: an identifier member, or a string that names one of their
    /// identifiers as a word (an audit line of a lookup by transaction id: "granted to order O of player U").
    /// It is what ``json(_:freeText:)`` without free text would change.
    public func mentions(_ bytes: [UInt8]) -> Bool {
        var found = false
        walk(bytes) { key, text in
            if string(text, key: key) != text { found = true }
            return nil
        }
        return found
    }

    /// A string of the player's own records as it is kept after the erasure: an identifier member's identifier
    /// becomes its pseudonym; the members of `freeText`, and any other text naming an identifier as a word of its
    /// own, become ``erasedText``.
    public func string(_ text: String, key: String?, freeText: Set<String> = []) -> String {
        if let key, Self.identifierKeys.contains(key), let pseudonym = replacements[text] { return pseudonym }
        if let key, freeText.contains(key), !text.isEmpty { return Self.erasedText }
        if let pseudonym = replacements[text] {
            // The whole value equals an identifier: under a member that holds another kind of value (a transaction id
            // equal to an order id) it is that value and stays; alone, it is the identifier.
            return key == nil ? pseudonym : text
        }
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

    /// A JSON document of the player's own records (a stored event, an audit line's request or answer) with each
    /// string value rewritten by ``string(_:key:freeText:)``; keys, numbers, layout and every other byte kept.
    /// It fails closed: what it cannot read, it erases when it names the player.
    public func json(_ bytes: [UInt8], freeText: Set<String> = []) -> [UInt8] {
        guard bytes.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }).map({ $0 == 0x7B || $0 == 0x5B }) == true
        else {
            // Not a JSON object or array: kept whole, unless it names the player.
            let text = String(decoding: bytes, as: UTF8.self)
            return names(text) || replacements[text] != nil ? Array(Self.erasedText.utf8) : bytes
        }
        return walk(bytes) { key, text in
            let rewritten = string(text, key: key, freeText: freeText)
            return rewritten == text ? nil : rewritten
        }
    }

    /// ``json(_:freeText:)`` of text (an audit line's request or answer, kept as text).
    public func text(_ text: String, freeText: Set<String> = []) -> String {
        String(decoding: json(Array(text.utf8), freeText: freeText), as: UTF8.self)
    }

    /// Copies `bytes`, giving each string value (with the member it belongs to) to `rewrite`, which answers its
    /// replacement or nil to keep it. A string that cannot be decoded, or a document cut short, is given as its raw
    /// text: erased when it names the player.
    @discardableResult
    private func walk(_ bytes: [UInt8], _ rewrite: (String?, String) -> String?) -> [UInt8] {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        var key: String?
        var keys: [String?] = []  // the member of each open object or array
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") { keys.append(key) }
            if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") { key = keys.popLast() ?? nil }
            guard byte == quote else {
                out.append(byte)
                index += 1
                continue
            }
            var end = index + 1
            while end < bytes.count && bytes[end] != quote { end += bytes[end] == backslash ? 2 : 1 }
            guard end < bytes.count else {
                // Cut short: the rest kept as it is, unless it names the player.
                let rest = String(decoding: bytes[index...], as: UTF8.self)
                out += names(rest) ? Array("\"\(Self.erasedText)\"".utf8) : Array(bytes[index...])
                break
            }
            let token = Array(bytes[index...end])
            var next = end + 1
            while next < bytes.count && [0x20, 0x09, 0x0A, 0x0D].contains(bytes[next]) { next += 1 }
            let text = JSONStringToken.text(token[...]) ?? String(decoding: token.dropFirst().dropLast(), as: UTF8.self)
            if next < bytes.count && bytes[next] == UInt8(ascii: ":") {
                key = text
                out += token
            } else if let rewritten = rewrite(key, text) {
                out += Self.encoded(rewritten)
            } else {
                out += token
            }
            index = end + 1
        }
        return out
    }

    private static func encoded(_ text: String) -> [UInt8] {
        (try? JSONSerialization.data(withJSONObject: text, options: .fragmentsAllowed)).map(Array.init)
            ?? Array("\"\(erasedText)\"".utf8)
    }
}
