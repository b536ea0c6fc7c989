import Foundation
public import HTTPClient
public import Vocabulary

/// The App Store Server API: Get Transaction Info, production first, sandbox on "not found" when allowed.
public final class AppStoreServerAPIClient: Sendable {
    public struct Configuration: Sendable {
        /// Default: Apple's production host.
        public var productionURL = "https://api.storekit.apple.com"
        /// Default: Apple's sandbox host.
        public var sandboxURL = "https://api.storekit-sandbox.apple.com"
        /// Whether a transaction missing in production is looked up in the sandbox. Default: false.
        public var allowSandbox = false
        /// Per request. Default: 10 s.
        public var timeout: Duration = .seconds(10)
        /// The longest wait a `Retry-After` may ask for; a longer one, or a date centuries away, waits this
        /// long. The worker sets it to `retry.max_backoff_ms`. Default: 30 s.
        public var maximumRetryAfter: Duration = .seconds(30)
        /// Told of every call (for metrics).
        public var observer: AppleCallObserver?
        /// Keeps each endpoint and environment within Apple's rate; nil sends at once.
        public var governor: RateGovernor?
        /// The app's circuit breakers, one per call; nil: none.
        public var breakers: CircuitBreakers?

        public init() {}
    }

    /// Apple's error codes that mean "try again": the documented retryable set.
    public static let retryableErrorCodes: Set<Int> = [4040002, 4040004, 4040006, 5000001]
    static let transactionNotFound = 4040010

    public let configuration: Configuration
    let http: HTTPClient
    let tokens: APITokenIssuer

    public init(configuration: Configuration, tokens: APITokenIssuer, http: HTTPClient) {
        self.configuration = configuration
        self.tokens = tokens
        self.http = http
    }

    /// Apple's answer on one transaction id.
    public enum TransactionLookup: Sendable {
        /// The `signedTransactionInfo` JWS; verify it like a StoreKit 2 signed transaction.
        case found(signedTransaction: String)
        /// Not in production, and sandbox not allowed or not there either.
        case notFound
        /// Apple refused the id (for example 4000006, an invalid transaction id).
        case rejected(errorCode: Int)
    }

    /// Looks a transaction up. `attempts` counts the HTTP calls made. Transient failures throw a retriable
    /// ``AppleVerificationError`` (with `retryAfter` when Apple said when to come back).
    /// `in`: the one environment to ask, when the caller knows it (an app receipt says which it is; Sandbox
    /// only where allowed, never otherwise); nil: Production first, then Sandbox when Production does not
    /// know the id and Sandbox is allowed. With Sandbox not allowed no Sandbox endpoint is ever called.
    public func transactionInfo(id: String, in environment: AppleEnvironment? = nil, attempts: inout Int)
        async throws -> TransactionLookup
    {
        guard !id.isEmpty, id.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return .rejected(errorCode: 4000006)
        }
        if let environment, environment != .production {
            guard configuration.allowSandbox else { return .notFound }
            return try await lookup(id: id, base: configuration.sandboxURL, sandbox: true, attempts: &attempts)
        }
        let production = try await lookup(
            id: id, base: configuration.productionURL, sandbox: false, attempts: &attempts)
        guard case .notFound = production, environment == nil, configuration.allowSandbox else { return production }
        return try await lookup(id: id, base: configuration.sandboxURL, sandbox: true, attempts: &attempts)
    }

    private func lookup(id: String, base: String, sandbox: Bool, attempts: inout Int, renewedToken: Bool = false)
        async throws -> TransactionLookup
    {
        let call = sandbox ? "transaction_info_sandbox" : "transaction_info_production"
        try await governed(RateGovernor.Lane(endpoint: "transaction_info", sandbox: sandbox))
        attempts += 1
        let request = HTTPRequest(
            url: "\(base)/inApps/v1/transactions/\(id)",
            headers: [("Authorization", "Bearer \(try tokens.token())"), ("Accept", "application/json")],
            timeout: configuration.timeout)
        let response = try await AppleHTTP.execute(
            request, with: http, endpoint: "transactionInfo", call: call, observe: configuration.observer,
            breakers: configuration.breakers)
        pauseIfLimited(response, RateGovernor.Lane(endpoint: "transaction_info", sandbox: sandbox))
        AppleHTTP.record(configuration.breakers, call, failed: Self.isFailure(response))
        if response.status == 200 {
            guard let body = try? JSONDecoder().decode(TransactionInfoResponse.self, from: response.body),
                let signed = body.signedTransactionInfo
            else {
                throw AppleVerificationError(
                    .apiError, "transactionInfo: HTTP 200 without signedTransactionInfo", isRetriable: true)
            }
            return .found(signedTransaction: signed)
        }
        if response.status == 401 {
            // A token Apple no longer takes (a clock step, a revoked key): sign a new one, once.
            if !renewedToken {
                tokens.invalidate()
                return try await lookup(id: id, base: base, sandbox: sandbox, attempts: &attempts, renewedToken: true)
            }
            // In production a 401 also means the app has no production release yet. Either way it is our
            // configuration, not the player's purchase: never a deny, and no retry will fix it: the job goes to
            // the DLQ as cannot_verify (replay once fixed). With a body or without.
            throw AppleVerificationError(
                .unauthorized,
                "transactionInfo: HTTP 401 (check apple.api.key_id, issuer_id and the key; in production, the app may not be released yet)",
                isRetriable: false)
        }
        guard let apiError = try? JSONDecoder().decode(APIErrorBody.self, from: response.body),
            let code = apiError.errorCode
        else {
            throw AppleHTTP.statusError(
                response, endpoint: "transactionInfo", maximumRetryAfter: configuration.maximumRetryAfter)
        }
        if code == Self.transactionNotFound { return .notFound }
        let retryAfter = AppleHTTP.retryAfter(
            response.header("retry-after"), maximum: configuration.maximumRetryAfter)
        if Self.retryableErrorCodes.contains(code) || response.status == 429 || response.status >= 500
            || response.status == 408
        {
            throw AppleVerificationError(
                response.status == 429 ? .rateLimited : .apiError,
                "transactionInfo: Apple error \(code) (HTTP \(response.status))", isRetriable: true,
                retryAfter: retryAfter)
        }
        // Only a 400 speaks of the id itself (4000006: not a transaction id). An app or account Apple does not
        // know for this key (4040003, 4040001 on a 404), a 403, is this deployment's configuration: a genuine
        // purchase is never denied for it; the job goes to the DLQ as cannot_verify, to replay once fixed.
        guard response.status == 400 else {
            throw AppleVerificationError(
                .unauthorized,
                "transactionInfo: Apple error \(code) (HTTP \(response.status)): check apple.api.* and the app's bundle id",
                isRetriable: false)
        }
        return .rejected(errorCode: code)
    }
}

extension AppStoreServerAPIClient {
    /// Whether an answer is Apple failing, for its call's breaker: a 5xx, a 408, or one of Apple's retryable
    /// error codes (a 429 is Apple answering; the governor pauses its lane).
    static func isFailure(_ response: HTTPResponse) -> Bool {
        if response.status >= 500 || response.status == 408 { return true }
        guard response.status != 200 && response.status != 429 else { return false }
        let code = (try? JSONDecoder().decode(APIErrorBody.self, from: response.body))?.errorCode
        return code.map(retryableErrorCodes.contains) ?? false
    }

    /// Waits for the lane's turn, when a governor is configured.
    func governed(_ lane: RateGovernor.Lane) async throws {
        await configuration.governor?.acquire(lane)
        // Cancelled while waiting (the worker stopping): nothing is sent that the governor did not count.
        try Task.checkCancellation()
    }

    /// A 429 pauses the whole lane until Apple's `Retry-After` (at most the governor's maximum pause).
    func pauseIfLimited(_ response: HTTPResponse, _ lane: RateGovernor.Lane) {
        guard response.status == 429, let governor = configuration.governor else { return }
        governor.pause(
            lane, retryAfter: AppleHTTP.retryAfter(response.header("retry-after"), maximum: governor.maximumPause))
    }
}

/// `{"signedTransactionInfo": "..."}`.
struct TransactionInfoResponse: Decodable {
    let signedTransactionInfo: String?
}

/// Apple's error body, `{"errorCode": 4040010, "errorMessage": "..."}`. An unknown code is kept raw.
public struct APIErrorBody: Decodable, Sendable {
    public let errorCode: Int?
    public let errorMessage: String?
}
