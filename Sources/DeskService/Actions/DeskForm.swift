import Vocabulary
import Support
import Foundation

/// A request the desk refuses before anything is asked or recorded: malformed JSON, an unknown field, a value of
/// hostile bytes. Answered 400 with `reason`, which never repeats the value.
package struct BadRequest: Error, Equatable {
    package let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// A JSON object of the API, read strictly: only the fields named, each checked.
struct DeskForm {
    private let fields: [String: JSONValue]

    /// `allowed`: the fields this request may have (any other is refused: a typo must not go unnoticed).
    init(_ body: Data, allowed: Set<String>) throws(BadRequest) {
        guard body.count <= 16_384 else { throw BadRequest("the request is too large") }
        guard let object = JSONValue(parsing: body)?.object else {
            throw BadRequest("the body must be a JSON object")
        }
        if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw BadRequest(
                DeskText.isPlain(unknown, maxBytes: 64) ? "unknown field \(unknown)" : "an unknown field")
        }
        fields = object
    }

    func has(_ name: String) -> Bool { fields[name].map { !$0.isNull } ?? false }

    func optional(_ name: String, _ valid: (String) -> Bool, _ expected: String) throws(BadRequest) -> String? {
        guard has(name) else { return nil }
        guard let text = fields[name]?.string, valid(text) else { throw BadRequest("\(name) must be \(expected)") }
        return text
    }

    func required(_ name: String, _ valid: (String) -> Bool, _ expected: String) throws(BadRequest) -> String {
        guard let text = try optional(name, valid, expected) else { throw BadRequest("\(name) is required") }
        return text
    }

    func ticket() throws(BadRequest) -> String {
        try required("ticket", DeskText.isTicket, "the helpdesk's ticket id: 1 to 64 of A-Z a-z 0-9 - _ . : # /")
    }

    func app() throws(BadRequest) -> String? {
        try optional("app", { DeskText.isPlain($0, maxBytes: 155) }, "an app's name or bundle id")
    }

    /// A whole number within `range` (JSON `7`, not `"7"` nor `7.5`), nil when absent.
    func integer(_ name: String, in range: ClosedRange<Int>) throws(BadRequest) -> Int? {
        guard has(name) else { return nil }
        guard let value = fields[name]?.int, range.contains(Int(value)) else {
            throw BadRequest("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return Int(value)
    }

    /// `true` or `false`, nil when absent.
    func bool(_ name: String) throws(BadRequest) -> Bool? {
        guard has(name) else { return nil }
        guard let value = fields[name]?.bool else { throw BadRequest("\(name) must be true or false") }
        return value
    }

    /// A list of strings, each valid, at most `maxCount`; nil when absent.
    func strings(_ name: String, maxCount: Int, _ valid: (String) -> Bool, _ expected: String) throws(BadRequest)
        -> [String]?
    {
        guard has(name) else { return nil }
        guard let list = fields[name]?.array, list.count <= maxCount else {
            throw BadRequest("\(name) must be a list of at most \(maxCount) \(expected)")
        }
        var strings: [String] = []
        for item in list {
            guard let text = item.string, valid(text) else {
                throw BadRequest("\(name) must be a list of at most \(maxCount) \(expected)")
            }
            strings.append(text)
        }
        return strings
    }

    /// A user id or an order id: what a job carries (1 to 128 bytes, no control characters).
    func gameID(_ name: String) throws(BadRequest) -> String {
        try required(name, { DeskText.isPlain($0, maxBytes: 128) }, "1 to 128 bytes without control characters")
    }
}
