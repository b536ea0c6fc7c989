public import Foundation
import HTTPClient
public import Vocabulary

extension AppStoreServerAPIClient {
    /// How Apple took a consumption answer.
    public enum ConsumptionDelivery: Sendable, Equatable {
        /// 202: Apple has it.
        case accepted
        /// Apple refused it for good (a 4xx with this error code, or none): no retry will change it.
        case refused(status: Int, errorCode: Int?)
    }

    /// Send Consumption Information (V2): `PUT /inApps/v2/transactions/consumption/{transactionID}` with the
    /// JSON `body`, in `environment`'s host. Transient failures throw a retriable ``AppleVerificationError``
    /// (with `retryAfter` when Apple said when to come back); a 401 gets one fresh token first.
    public func sendConsumption(
        transactionID: String, body: Data, environment: AppleEnvironment, attempts: inout Int
    ) async throws -> ConsumptionDelivery {
        let base = environment == .sandbox ? configuration.sandboxURL : configuration.productionURL
        let response = try await authorized(
            method: .put, url: "\(base)/inApps/v2/transactions/consumption/\(transactionID)", body: body,
            endpoint: "sendConsumption", call: "consumption_\(environment == .sandbox ? "sandbox" : "production")",
            lane: RateGovernor.Lane(endpoint: "consumption", sandbox: environment == .sandbox), attempts: &attempts)
        if (200..<300).contains(response.status) { return .accepted }
        let code = (try? JSONDecoder().decode(APIErrorBody.self, from: response.body))?.errorCode
        try throwIfTransient(response, errorCode: code, endpoint: "sendConsumption")
        return .refused(status: response.status, errorCode: code)
    }

    /// One page of Get Notification History: `POST /inApps/v1/notifications/history`.
    public struct NotificationHistoryPage: Sendable {
        /// Each notification's `signedPayload`, as Apple sent it.
        public var signedPayloads: [String]
        /// The token of the next page, when there is one.
        public var nextPage: String?
    }

    /// Every notification Apple sent (or tried to) from `start` to `end`, one page at a time; pass the
    /// previous page's `nextPage` to read on. `onlyFailures`: only those Apple could not deliver.
    public func notificationHistory(
        environment: AppleEnvironment, start: Date, end: Date, page token: String?, onlyFailures: Bool = false,
        attempts: inout Int
    ) async throws -> NotificationHistoryPage {
        let base = environment == .sandbox ? configuration.sandboxURL : configuration.productionURL
        var url = "\(base)/inApps/v1/notifications/history"
        if let token {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            url += "?paginationToken=" + (token.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")
        }
        let request = HistoryRequest(
            startDate: Int64((start.timeIntervalSince1970 * 1000).rounded()),
            endDate: Int64((end.timeIntervalSince1970 * 1000).rounded()), onlyFailures: onlyFailures ? true : nil)
        let response = try await authorized(
            method: .post, url: url, body: try JSONEncoder().encode(request), endpoint: "notificationHistory",
            call: "notification_history_\(environment == .sandbox ? "sandbox" : "production")",
            lane: RateGovernor.Lane(endpoint: "notification_history", sandbox: environment == .sandbox),
            attempts: &attempts)
        try requireOK(response, endpoint: "notificationHistory")
        guard let page = try? JSONDecoder().decode(HistoryResponse.self, from: response.body) else {
            throw AppleVerificationError(
                .apiError, "notificationHistory: HTTP 200 without a history", isRetriable: true)
        }
        // More, and no way to ask for it: read as the end, the window would count as read with pages never seen.
        let next = page.paginationToken.flatMap { $0.isEmpty ? nil : $0 }
        if page.hasMore == true, next == nil {
            throw AppleVerificationError(
                .apiError, "notificationHistory: hasMore without a paginationToken", isRetriable: true)
        }
        return NotificationHistoryPage(
            signedPayloads: (page.notificationHistory ?? []).compactMap(\.signedPayload),
            nextPage: page.hasMore == true ? next : nil)
    }

    /// One authorized call; a 401 gets one fresh token (Apple no longer takes the old one), a second 401 is
    /// our configuration: not retriable.
    func authorized(
        method: HTTPRequest.Method, url: String, body: Data?, endpoint: String, call: String,
        lane: RateGovernor.Lane, attempts: inout Int
    ) async throws -> HTTPResponse {
        for renewed in [false, true] {
            try await governed(lane)
            attempts += 1
            let request = HTTPRequest(
                method: method, url: url,
                headers: [
                    ("Authorization", "Bearer \(try tokens.token())"), ("Content-Type", "application/json"),
                    ("Accept", "application/json"),
                ],
                body: body, timeout: configuration.timeout)
            let response = try await AppleHTTP.execute(
                request, with: http, endpoint: endpoint, call: call, observe: configuration.observer,
                breakers: configuration.breakers)
            pauseIfLimited(response, lane)
            AppleHTTP.record(configuration.breakers, call, failed: Self.isFailure(response))
            guard response.status == 401 else { return response }
            if !renewed { tokens.invalidate() }
        }
        throw AppleVerificationError(
            .unauthorized, "\(endpoint): HTTP 401 (check apple.api.key_id, issuer_id and the key)", isRetriable: false)
    }

    /// Returns for a 200; throws a retriable error for Apple's transient answers, else one that is not retriable.
    func requireOK(_ response: HTTPResponse, endpoint: String) throws {
        guard response.status != 200 else { return }
        let code = (try? JSONDecoder().decode(APIErrorBody.self, from: response.body))?.errorCode
        try throwIfTransient(response, errorCode: code, endpoint: endpoint)
        throw AppleVerificationError(
            .apiError, "\(endpoint): Apple error \(code.map(String.init) ?? "none") (HTTP \(response.status))",
            isRetriable: false)
    }

    /// Throws a retriable error for Apple's transient answers (its retryable codes, 429, 5xx, 408).
    func throwIfTransient(_ response: HTTPResponse, errorCode: Int?, endpoint: String) throws {
        let retryAfter = AppleHTTP.retryAfter(response.header("retry-after"), maximum: configuration.maximumRetryAfter)
        if let errorCode,
            Self.retryableErrorCodes.contains(errorCode) || response.status == 429
                || response.status >= 500
        {
            throw AppleVerificationError(
                response.status == 429 ? .rateLimited : .apiError,
                "\(endpoint): Apple error \(errorCode) (HTTP \(response.status))", isRetriable: true,
                retryAfter: retryAfter)
        }
        if errorCode == nil && (response.status == 429 || response.status >= 500 || response.status == 408) {
            throw AppleHTTP.statusError(
                response, endpoint: endpoint, maximumRetryAfter: configuration.maximumRetryAfter)
        }
    }
}

private struct HistoryRequest: Encodable {
    let startDate: Int64
    let endDate: Int64
    /// Only the notifications Apple could not deliver (absent: every one).
    let onlyFailures: Bool?
}

private struct HistoryResponse: Decodable {
    struct Item: Decodable {
        let signedPayload: String?
    }
    let notificationHistory: [Item]?
    let hasMore: Bool?
    let paginationToken: String?
}
