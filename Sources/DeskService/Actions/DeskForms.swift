import Vocabulary
import Support
package import Foundation

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

    /// A user id or an order id: what a job carries (1 to 128 bytes, no control characters).
    func gameID(_ name: String) throws(BadRequest) -> String {
        try required(name, { DeskText.isPlain($0, maxBytes: 128) }, "1 to 128 bytes without control characters")
    }
}

/// What a lookup asks, parsed.
package struct LookupForm {
    package var ticket: String
    var app: String?
    var query: SupportDesk.Query
    /// The player the question names, for the audit.
    var player: String?

    static let queryFields = ["transaction_id", "apple_order_id", "order_id", "app_account_token", "user_id"]

    package init(_ body: Data) throws(BadRequest) {
        let form = try DeskForm(body, allowed: Set(["ticket", "app"] + Self.queryFields))
        ticket = try form.ticket()
        app = try form.app()
        let given = Self.queryFields.filter { form.has($0) }
        guard given.count == 1, let field = given.first else {
            throw BadRequest("name exactly one of \(Self.queryFields.joined(separator: ", "))")
        }
        switch field {
        case "transaction_id":
            query = .transactionID(try form.required(field, DeskText.isTransactionID, "digits"))
        case "apple_order_id":
            query = .appleOrderID(try form.required(field, DeskText.isAppleOrderID, "Apple's letters and digits"))
        case "order_id":
            query = .orderID(try form.gameID(field))
        case "app_account_token":
            let text = try form.required(field, { UUID(uuidString: $0) != nil }, "a UUID")
            query = .appAccountToken(text.lowercased())
        default:
            let userID = try form.gameID(field)
            query = .userID(userID)
            player = userID
        }
    }
}

/// What a history asks: any transaction id of the customer.
struct HistoryForm {
    var ticket: String
    var app: String?
    var transactionID: String

    init(_ body: Data) throws(BadRequest) {
        let form = try DeskForm(body, allowed: ["ticket", "app", "transaction_id"])
        ticket = try form.ticket()
        app = try form.app()
        transactionID = try form.required("transaction_id", DeskText.isTransactionID, "digits")
    }
}

/// A credit as an agent asks it; kept as JSON while it is held for a lead.
package struct CreditForm: Codable, Equatable {
    var ticket: String
    var app: String?
    var transactionID: String
    var orderID: String
    var userID: String
    var reason: String
    var appleOrderID: String?
    var appAccountToken: String?

    enum CodingKeys: String, CodingKey {
        case ticket, app, reason
        case transactionID = "transaction_id"
        case orderID = "order_id"
        case userID = "user_id"
        case appleOrderID = "apple_order_id"
        case appAccountToken = "app_account_token"
    }

    package init(_ body: Data) throws(BadRequest) {
        let form = try DeskForm(
            body,
            allowed: [
                "ticket", "app", "transaction_id", "order_id", "user_id", "reason", "apple_order_id",
                "app_account_token",
            ])
        ticket = try form.ticket()
        app = try form.app()
        transactionID = try form.required("transaction_id", DeskText.isTransactionID, "digits")
        orderID = try form.gameID("order_id")
        userID = try form.gameID("user_id")
        reason = try form.required("reason", { DeskText.isPlain($0, maxBytes: 500) }, "1 to 500 bytes of plain text")
        appleOrderID = try form.optional("apple_order_id", DeskText.isAppleOrderID, "Apple's letters and digits")
        appAccountToken = try form.optional("app_account_token", { UUID(uuidString: $0) != nil }, "a UUID")
        guard appleOrderID != nil || appAccountToken != nil else {
            throw BadRequest(
                "say apple_order_id (the player's invoice) or app_account_token (the player's token): the proof that"
                    + " the purchase is the player's")
        }
    }

    /// The credit as the CLI's and the desk's one implementation takes it; `by` is the agent, from their token.
    func request(by agent: String) -> SupportDesk.CreditRequest {
        SupportDesk.CreditRequest(
            transactionID: transactionID, orderID: orderID, userID: userID, by: agent,
            reason: "ticket \(ticket): \(reason)", appleOrderID: appleOrderID,
            appAccountToken: appAccountToken.flatMap(UUID.init(uuidString:)))
    }

    package var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

/// A lead's approval or rejection of a held credit.
package struct DecisionForm {
    package var ticket: String
    var reason: String?

    package init(_ body: Data, rejecting: Bool) throws(BadRequest) {
        let form = try DeskForm(body, allowed: rejecting ? ["ticket", "reason"] : ["ticket"])
        ticket = try form.ticket()
        reason =
            rejecting
            ? try form.required("reason", { DeskText.isPlain($0, maxBytes: 500) }, "1 to 500 bytes of plain text")
            : nil
    }
}
