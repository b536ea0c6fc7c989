import Foundation
import HTTPClient

/// Told of every HTTP call to Apple: the call (`verify_receipt_production`, `verify_receipt_sandbox`,
/// `transaction_info_production`, `transaction_info_sandbox`), its outcome (`ok`, `rate_limited`,
/// `http_4xx`, `http_5xx`, `timeout`, `transport_error`) and how long it took. Called on the HTTP client's
/// thread: it must be quick.
public typealias AppleCallObserver = @Sendable (_ call: String, _ outcome: String, _ duration: Duration) -> Void

/// What the Apple clients share about HTTP: transport errors and statuses mapped to
/// ``AppleVerificationError`` with Apple's transient set, and `Retry-After` read both ways Apple is seen to send it.
enum AppleHTTP {
    /// Makes one call. `observe` (for metrics) learns how long it took and how it ended; `call` names the
    /// endpoint and environment there (`verify_receipt_production`, ...).
    static func execute(
        _ request: HTTPRequest, with http: HTTPClient, endpoint: String, call: String, observe: AppleCallObserver?
    ) async throws -> HTTPResponse {
        let started = ContinuousClock.now
        do {
            let response = try await http.execute(request)
            observe?(call, outcome(status: response.status), ContinuousClock.now - started)
            return response
        } catch let error as HTTPClientError {
            observe?(call, error.kind == .timeout ? "timeout" : "transport_error", ContinuousClock.now - started)
            let code: AppleVerificationError.Code = error.kind == .timeout ? .timeout : .transport
            // Any failure to get an answer is transient for the job: Apple may answer next time.
            throw AppleVerificationError(code, "\(endpoint): \(error.reason)", isRetriable: error.kind != .cancelled)
        }
    }

    /// The outcome label of an answered call: `ok`, `rate_limited`, `http_4xx` or `http_5xx`.
    static func outcome(status: Int) -> String {
        switch status {
        case 200..<300: "ok"
        case 429: "rate_limited"
        case 500...: "http_5xx"
        default: "http_4xx"
        }
    }

    /// An error for a non-success HTTP status without a usable Apple error body.
    static func statusError(_ response: HTTPResponse, endpoint: String) -> AppleVerificationError {
        let retryAfter = retryAfterSeconds(response.header("retry-after"))
        if response.status == 429 {
            return AppleVerificationError(
                .rateLimited, "\(endpoint): rate limited (HTTP 429)", isRetriable: true, retryAfter: retryAfter)
        }
        return AppleVerificationError(
            .httpStatus, "\(endpoint): HTTP \(response.status)",
            isRetriable: response.status >= 500 || response.status == 408,
            retryAfter: retryAfter)
    }

    /// Seconds from now. Apple documents `Retry-After` on the Server API as a UNIX time in milliseconds;
    /// HTTP's own form is a number of seconds. Both are accepted: a number past 10^12 is epoch
    /// milliseconds, past 10^9 epoch seconds, else a delay in seconds.
    static func retryAfterSeconds(_ value: String?, now: Date = Date()) -> Double? {
        guard let value, let number = Double(value.trimmingCharacters(in: .whitespaces)), number >= 0 else {
            return nil
        }
        let seconds: Double
        if number >= 1e12 {
            seconds = number / 1000 - now.timeIntervalSince1970
        } else if number >= 1e9 {
            seconds = number - now.timeIntervalSince1970
        } else {
            seconds = number
        }
        return max(0, seconds)
    }
}
