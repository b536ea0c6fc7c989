import Vocabulary
import Support
package import Foundation

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
