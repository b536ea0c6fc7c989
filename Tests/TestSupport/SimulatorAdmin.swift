import Foundation
public import HTTPClient

/// The App Store simulator's admin API, as tests use it: purchases, refunds, faults.
public struct SimulatorAdmin: Sendable {
    public let baseURL: String
    public let http: HTTPClient

    public init(baseURL: String, http: HTTPClient) {
        self.baseURL = baseURL
        self.http = http
    }

    /// What the app would send for a purchase.
    public struct Purchase: Decodable, Sendable {
        public let transactionID: String
        public let receipt: String
        public let signedTransaction: String

        enum CodingKeys: String, CodingKey {
            case transactionID = "transaction_id"
            case receipt
            case signedTransaction = "signed_transaction"
        }
    }

    public func purchase(_ fields: [String: Any]) async throws -> Purchase {
        let response = try await post("/admin/purchases", fields)
        return try JSONDecoder().decode(Purchase.self, from: response.body)
    }

    /// Another app the simulator sells for (POST /admin/apps).
    public func addApp(_ fields: [String: Any]) async throws {
        let response = try await post("/admin/apps", fields)
        guard response.status == 200 else { throw TestSupportError("POST /admin/apps answered \(response.status)") }
    }

    public func refund(transactionID: String) async throws {
        _ = try await post("/admin/refunds", ["transaction_id": transactionID])
    }

    /// Where the simulator sends App Store Server Notifications, and how soon it retries a failed one.
    public func sendNotifications(to url: String, retryDelaysMs: [Int] = [300, 600, 1200, 2400, 4800]) async throws {
        _ = try await post("/admin/notifications/config", ["url": url, "retry_delays_ms": retryDelaysMs])
    }

    /// A sender call (`refund`, `reverse-refund`, `revoke`, `consumption-request`, `notify`): the
    /// notification's uuid.
    public func notify(_ action: String, _ fields: [String: Any]) async throws -> String {
        let response = try await post("/admin/\(action)", fields)
        let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        guard response.status == 200, let uuid = object?["notification_uuid"] as? String else {
            throw TestSupportError(
                "/admin/\(action) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        }
        return uuid
    }

    /// Any admin call (`renew`, `expire`, ...): its JSON answer; an answer other than 200 or 201 throws.
    public func call(_ action: String, _ fields: [String: Any]) async throws -> [String: Any] {
        let response = try await post("/admin/\(action)", fields)
        guard response.status == 200 || response.status == 201,
            let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        else {
            throw TestSupportError(
                "/admin/\(action) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        }
        return object
    }

    /// The notifications sent, with their delivery attempts.
    public func notifications() async throws -> [[String: Any]] {
        let response = try await http.execute(HTTPRequest(url: "\(baseURL)/admin/notifications"))
        return (try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]]) ?? []
    }

    /// The consumption answers the simulator accepted.
    public func consumptionAnswers() async throws -> [[String: Any]] {
        let response = try await http.execute(HTTPRequest(url: "\(baseURL)/admin/consumption"))
        return (try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]]) ?? []
    }

    public func faults(_ fields: [String: Any]) async throws {
        _ = try await http.execute(
            HTTPRequest(
                method: .put, url: "\(baseURL)/admin/faults", body: try JSONSerialization.data(withJSONObject: fields)))
    }

    /// Requests the simulator's Apple endpoints answered so far, every endpoint together.
    public func appleRequests() async throws -> Int {
        try await requestsByLane().values.reduce(0, +)
    }

    /// Requests answered so far by lane: `production.consumption`, `sandbox.transactionInfo`, ...
    public func requestsByLane() async throws -> [String: Int] {
        let response = try await http.execute(HTTPRequest(url: "\(baseURL)/admin/stats"))
        return (try JSONSerialization.jsonObject(with: response.body) as? [String: Int]) ?? [:]
    }

    private func post(_ path: String, _ fields: [String: Any]) async throws -> HTTPResponse {
        try await http.execute(
            HTTPRequest(
                method: .post, url: "\(baseURL)\(path)", body: try JSONSerialization.data(withJSONObject: fields)))
    }
}
