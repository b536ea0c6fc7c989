public import AppleVerification
import Foundation
public import LedgerDomain
public import Support
public import Vocabulary

/// An amends after an outage as support asks it, from the desk or the command line: one subscription's renewal
/// date moved later, or every active subscriber's of a product. Both carry a request identifier, which Apple asks
/// to be sent again unchanged after a timeout or an error (the console makes one per form and keeps it until an
/// answer; the command line prints it before asking).
public struct ExtensionOrder: Sendable, Equatable {
    public enum Scope: Sendable, Equatable {
        case one(originalTransactionID: String)
        /// `storefronts`: three-letter codes; nil for every storefront.
        case all(productID: String, storefronts: [String]?, environment: AppleEnvironment)
    }

    public var scope: Scope
    public var days: Int
    public var reason: SupportDesk.ExtendReason
    public var requestIdentifier: String

    public init(scope: Scope, days: Int, reason: SupportDesk.ExtendReason, requestIdentifier: String) {
        self.scope = scope
        self.days = days
        self.reason = reason
        self.requestIdentifier = requestIdentifier
    }

    /// The audit's action: `extend` or `extend_all`.
    public var action: String {
        if case .one = scope { return "extend" }
        return "extend_all"
    }

    /// What was asked, for the audit and the answer.
    public var asked: JSONValue {
        var object: [String: JSONValue] = [
            "days": JSONValue(days), "reason": .string(reason.name), "request_id": .string(requestIdentifier),
        ]
        switch scope {
        case .one(let id):
            object["original_transaction_id"] = .string(id)
        case .all(let product, let storefronts, let environment):
            object["product_id"] = .string(product)
            object["storefronts"] = storefronts.map { JSONValue($0) } ?? .null
            object["environment"] = .string(environment.rawValue)
        }
        return .object(object)
    }

    /// Asks Apple, and says what came of it: the audit's outcome (`extended`, `started`, `refused`) and the answer.
    public func carryOut(with desk: SupportDesk) async throws -> (outcome: String, answer: JSONValue) {
        let ask = SupportDesk.RenewalExtension(days: days, reason: reason, requestIdentifier: requestIdentifier)
        switch scope {
        case .one(let id):
            switch try await desk.extendSubscription(originalTransactionID: id, ask) {
            case .extended(let date, let environment):
                return (
                    "extended",
                    [
                        "outcome": "extended", "request_id": .string(requestIdentifier),
                        "expires_at": date.map { .string(RFC3339.format($0)) } ?? .null,
                        "environment": .string(environment.rawValue),
                    ]
                )
            case .refused(let why):
                return ("refused", ["outcome": "refused", "error": .string(why)])
            }
        case .all(let product, let storefronts, let environment):
            switch try await desk.extendAllSubscriptions(
                productID: product, storefronts: storefronts, ask, environment: environment)
            {
            case .started(let identifier):
                return ("started", ["outcome": "started", "request_id": .string(identifier)])
            case .refused(let why):
                return ("refused", ["outcome": "refused", "error": .string(why)])
            }
        }
    }
}

/// An extension as the desk's API takes it.
struct ExtensionForm {
    var ticket: String
    var app: String?
    var order: ExtensionOrder

    init(_ body: Data, all: Bool, newIdentifier: () -> String) throws(BadRequest) {
        let form = try DeskForm(
            body,
            allowed: all
                ? ["ticket", "app", "product_id", "storefronts", "environment", "days", "reason", "request_id"]
                : ["ticket", "app", "original_transaction_id", "days", "reason", "request_id"])
        ticket = try form.ticket()
        app = try form.app()
        guard let days = try form.integer("days", in: 1...90) else { throw BadRequest("days is required: 1 to 90") }
        let reasonName = try form.required(
            "reason", { SupportDesk.extendReason(named: $0) != nil },
            "undeclared, customer_satisfaction, other or service_issue")
        let scope: ExtensionOrder.Scope
        if all {
            let product = try form.required("product_id", SupportDesk.isProductID, "a product id")
            let storefronts = try form.strings(
                "storefronts", maxCount: 200, SupportDesk.isStorefront, "storefront codes (three capital letters)")
            if storefronts?.isEmpty == true { throw BadRequest("storefronts must name one or more, or be left out") }
            let environment = try form.optional(
                "environment", { $0 == "Production" || $0 == "Sandbox" }, "Production or Sandbox")
            scope = .all(
                productID: product, storefronts: storefronts,
                environment: environment.map(AppleEnvironment.init(rawValue:)) ?? .production)
        } else {
            scope = .one(
                originalTransactionID: try form.required(
                    "original_transaction_id", DeskText.isTransactionID, "digits"))
        }
        let identifier =
            all
            ? try form.optional("request_id", { UUID(uuidString: $0) != nil }, "a UUID")?.lowercased()
            : try form.optional("request_id", { DeskText.isPlain($0, maxBytes: 128) }, "1 to 128 bytes")
        order = ExtensionOrder(
            scope: scope, days: days, reason: SupportDesk.extendReason(named: reasonName) ?? .undeclared,
            requestIdentifier: identifier ?? newIdentifier())
    }
}

extension DeskActions {
    // MARK: Amends after an outage

    /// A lead extends one subscription, or every subscriber of a product: audited, refusals included.
    func extend(_ agent: Agent, body: Data, all: Bool) async throws -> Answer {
        let form = try ExtensionForm(body, all: all) { UUID().uuidString.lowercased() }
        let app = try app(form.app)
        var line = audit(
            agent, action: form.order.action, app: app.name, ticket: form.ticket, player: nil,
            request: form.order.asked)
        guard agent.has(.lead) else {
            return try await refuse(&line, 403, "only a lead extends subscriptions")
        }
        let (outcome, answer): (String, JSONValue)
        do {
            (outcome, answer) = try await form.order.carryOut(with: app.desk)
        } catch {
            line.outcome = "failed"
            line.answer = Self.json(["error": "Apple did not answer"])
            try await store.appendAudit(line)
            throw error
        }
        line.outcome = outcome
        line.answer = Self.json(answer)
        try await store.appendAudit(line)
        return .json(outcome == "refused" ? 409 : 200, answer)
    }

    /// The mass extensions started (newest first, at most 50), each as asked: anyone with a support role sees them.
    func massExtensions(_ agent: Agent) async throws -> Answer {
        guard agent.has(.viewer) else { return .refused(403, "a support role is needed") }
        let lines = try await store.audit(AuditFilter(action: "extend_all", limit: 200))
            .filter { $0.outcome == "started" }.prefix(50)
        let listed = lines.map { line -> JSONValue in
            var object = JSONValue(parsing: Data(line.request.utf8))?.object ?? [:]
            object["at"] = .string(RFC3339.format(line.at))
            object["agent_name"] = .string(line.agentName)
            object["app"] = .string(line.app)
            object["ticket"] = .string(line.ticket)
            return .object(object)
        }
        return .json(200, ["extensions": .array(Array(listed))])
    }

    /// Where one mass extension stands at Apple: done or not, and its counts once done.
    func massExtensionStatus(_ agent: Agent, query: [String: String]) async throws -> Answer {
        guard agent.has(.viewer) else { return .refused(403, "a support role is needed") }
        guard let product = query["product_id"], SupportDesk.isProductID(product) else {
            throw BadRequest("product_id must be a product id")
        }
        guard let request = query["request_id"], UUID(uuidString: request) != nil else {
            throw BadRequest("request_id must be a UUID")
        }
        let environment = query["environment"] ?? "Production"
        guard environment == "Production" || environment == "Sandbox" else {
            throw BadRequest("environment must be Production or Sandbox")
        }
        let app = try app(query["app"])
        switch try await app.desk.massExtensionStatus(
            productID: product, requestIdentifier: request, environment: AppleEnvironment(rawValue: environment))
        {
        case .status(let status):
            return .json(
                200,
                [
                    "request_id": .string(request), "complete": .bool(status.complete),
                    "complete_date": status.completeDate.map { .string(RFC3339.format($0)) } ?? .null,
                    "succeeded_count": status.succeeded.map { .int($0) } ?? .null,
                    "failed_count": status.failed.map { .int($0) } ?? .null,
                ])
        case .refused(let why):
            return .refused(404, why)
        }
    }
}

extension DeskAudit {
    /// An operator's `receipt-worker extend`, under `--by`.
    public static func operatorExtension(
        _ order: ExtensionOrder, outcome: String, answer: JSONValue, app: String, by: String, ticket: String
    ) -> AuditEntry {
        AuditEntry(
            at: Date(), app: app, agent: operatorSubject(by), agentName: by, role: "operator", action: order.action,
            outcome: outcome, ticket: ticket, player: nil, request: DeskActions.json(fromCommandLine(order.asked)),
            answer: DeskActions.json(answer))
    }
}
