public import Foundation
import HTTPClient
public import Vocabulary

/// The endpoints of a support desk and of a grant's follow-up: Look Up Order ID (the order id on the customer's
/// invoice), Set App Account Token (a purchase made without one names its player from now on), Finish Transaction
/// (StoreKit stops delivering a transaction the server credited). Each has its own rate lane; transient failures
/// throw a retriable ``AppleVerificationError``, as every call of this client does.
extension AppStoreServerAPIClient {
    /// What Look Up Order ID found.
    public enum OrderLookup: Sendable, Equatable {
        /// The order's signed transactions (verify each like any signed transaction).
        case found(signedTransactions: [String])
        /// Apple knows no such order for this app in this environment (`status: 1`): another app's order too.
        case invalid
    }

    /// How Apple took a call that answers nothing but its status.
    public enum Acknowledgement: Sendable, Equatable {
        case done
        /// 404 4040010: no such transaction for this app in this environment.
        case notFound
        /// Refused for good: Apple's error code (4000183 a token that is not a UUID, 4000185 a family member's
        /// transaction, 4000187 not an original transaction id, ...), nil without one.
        case refused(status: Int, errorCode: Int?)
    }

    /// `GET /inApps/v1/lookup/{orderId}`. An order id is Apple's letters and digits: anything else is `.invalid`
    /// without a call (it would otherwise be a path sent to Apple).
    public func lookUpOrder(id orderID: String, environment: AppleEnvironment, attempts: inout Int) async throws
        -> OrderLookup
    {
        guard Self.isPlainID(orderID, letters: true) else { return .invalid }
        let response = try await authorized(
            method: .get, url: "\(base(environment))/inApps/v1/lookup/\(orderID)", body: nil,
            endpoint: "lookUpOrderID", call: "order_lookup_\(environment == .sandbox ? "sandbox" : "production")",
            lane: RateGovernor.Lane(endpoint: "order_lookup", sandbox: environment == .sandbox), attempts: &attempts)
        try requireOK(response, endpoint: "lookUpOrderID")
        guard let body = try? JSONDecoder().decode(OrderLookupResponse.self, from: response.body),
            let status = body.status
        else {
            throw AppleVerificationError(.apiError, "lookUpOrderID: HTTP 200 without a status", isRetriable: true)
        }
        guard status == 0 else { return .invalid }
        return .found(signedTransactions: body.signedTransactions ?? [])
    }

    /// `PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken` with `{"appAccountToken": token}`.
    public func setAppAccountToken(
        originalTransactionID: String, token: UUID, environment: AppleEnvironment, attempts: inout Int
    ) async throws -> Acknowledgement {
        guard Self.isPlainID(originalTransactionID, letters: false) else {
            return .refused(status: 400, errorCode: 4000006)
        }
        let body = Data("{\"appAccountToken\":\"\(token.uuidString.lowercased())\"}".utf8)
        return try await acknowledged(
            method: .put, path: "/inApps/v1/transactions/\(originalTransactionID)/appAccountToken", body: body,
            endpoint: "setAppAccountToken", lane: "app_account_token", environment: environment, attempts: &attempts)
    }

    /// `POST /inApps/v1/transactions/{transactionId}/finish` (App Store Server API 1.20).
    public func finishTransaction(id: String, environment: AppleEnvironment, attempts: inout Int) async throws
        -> Acknowledgement
    {
        guard Self.isPlainID(id, letters: false) else { return .refused(status: 400, errorCode: 4000006) }
        return try await acknowledged(
            method: .post, path: "/inApps/v1/transactions/\(id)/finish", body: Data(), endpoint: "finishTransaction",
            lane: "finish_transaction", environment: environment, attempts: &attempts)
    }

    private func acknowledged(
        method: HTTPRequest.Method, path: String, body: Data, endpoint: String, lane: String,
        environment: AppleEnvironment, attempts: inout Int
    ) async throws -> Acknowledgement {
        let sandbox = environment == .sandbox
        let response = try await authorized(
            method: method, url: base(environment) + path, body: body, endpoint: endpoint,
            call: "\(lane)_\(sandbox ? "sandbox" : "production")",
            lane: RateGovernor.Lane(endpoint: lane, sandbox: sandbox), attempts: &attempts)
        if (200..<300).contains(response.status) { return .done }
        let code = (try? JSONDecoder().decode(APIErrorBody.self, from: response.body))?.errorCode
        try throwIfTransient(response, errorCode: code, endpoint: endpoint)
        if code == Self.transactionNotFound { return .notFound }
        return .refused(status: response.status, errorCode: code)
    }

    func base(_ environment: AppleEnvironment) -> String {
        environment == .sandbox ? configuration.sandboxURL : configuration.productionURL
    }

    /// 1 to 64 ASCII digits (and letters, for an order id): never a path, a query or an escape.
    static func isPlainID(_ id: String, letters: Bool) -> Bool {
        (1...64).contains(id.utf8.count)
            && id.utf8.allSatisfy { byte in
                (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                    || (letters
                        && ((byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))))
            }
    }
}

private struct OrderLookupResponse: Decodable {
    let status: Int?
    let signedTransactions: [String]?
}

extension AppStoreServerAPIClient {
    /// One page of Get Transaction History v2: the customer's signed transactions in the app (at most 20, oldest
    /// first), and the revision that asks for the next page while `hasMore`.
    public struct HistoryPage: Sendable, Equatable {
        public var signedTransactions: [String]
        public var revision: String?
        public var hasMore: Bool

        public init(signedTransactions: [String], revision: String?, hasMore: Bool) {
            self.signedTransactions = signedTransactions
            self.revision = revision
            self.hasMore = hasMore
        }
    }

    public enum HistoryAnswer: Sendable, Equatable {
        case page(HistoryPage)
        /// 404 4040010: Apple knows no such transaction for this app in this environment.
        case notFound
        /// Refused for good: Apple's error code.
        case refused(status: Int, errorCode: Int?)
    }

    /// `GET /inApps/v2/history/{transactionId}?sort=ASCENDING[&revision=R]`, from any transaction id of the
    /// customer. The revision is Apple's opaque token: sent back only when it is plain (letters, digits and
    /// `-_=`), never as a path or a query of Apple's choosing.
    public func transactionHistory(
        id: String, revision: String?, environment: AppleEnvironment, attempts: inout Int
    ) async throws -> HistoryAnswer {
        guard Self.isPlainID(id, letters: false) else { return .refused(status: 400, errorCode: 4000006) }
        var url = "\(base(environment))/inApps/v2/history/\(id)?sort=ASCENDING"
        if let revision {
            guard (1...512).contains(revision.utf8.count),
                revision.utf8.allSatisfy({ byte in
                    (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                        || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "=")
                })
            else { return .refused(status: 400, errorCode: 4000005) }
            url += "&revision=\(revision)"
        }
        let sandbox = environment == .sandbox
        let response = try await authorized(
            method: .get, url: url, body: nil, endpoint: "transactionHistory",
            call: "transaction_history_\(sandbox ? "sandbox" : "production")",
            lane: RateGovernor.Lane(endpoint: "transaction_history", sandbox: sandbox), attempts: &attempts)
        if response.status == 200 {
            guard let body = try? JSONDecoder().decode(HistoryResponse.self, from: response.body),
                let signed = body.signedTransactions
            else {
                throw AppleVerificationError(
                    .apiError, "transactionHistory: HTTP 200 without signedTransactions", isRetriable: true)
            }
            return .page(
                HistoryPage(signedTransactions: signed, revision: body.revision, hasMore: body.hasMore ?? false))
        }
        let code = (try? JSONDecoder().decode(APIErrorBody.self, from: response.body))?.errorCode
        try throwIfTransient(response, errorCode: code, endpoint: "transactionHistory")
        if code == Self.transactionNotFound { return .notFound }
        return .refused(status: response.status, errorCode: code)
    }
}

private struct HistoryResponse: Decodable {
    let signedTransactions: [String]?
    let revision: String?
    let hasMore: Bool?
}
