import Foundation
import HTTPClient

/// What the Apple clients share about HTTP: transport errors and statuses mapped to
/// ``AppleVerificationError`` with Apple's transient set, and `Retry-After` read both ways Apple is seen to send it.
enum AppleHTTP {
    static func execute(_ request: HTTPRequest, with http: HTTPClient, endpoint: String) async throws -> HTTPResponse {
        do {
            return try await http.execute(request)
        } catch let error as HTTPClientError {
            let code: AppleVerificationError.Code = error.kind == .timeout ? .timeout : .transport
            // Any failure to get an answer is transient for the job: Apple may answer next time.
            throw AppleVerificationError(code, "\(endpoint): \(error.reason)", isRetriable: error.kind != .cancelled)
        }
    }

    /// An error for a non-success HTTP status without a usable Apple error body.
    static func statusError(_ response: HTTPResponse, endpoint: String) -> AppleVerificationError {
        let retryAfter = retryAfterSeconds(response.header("retry-after"))
        if response.status == 429 {
            return AppleVerificationError(.rateLimited, "\(endpoint): rate limited (HTTP 429)", isRetriable: true, retryAfter: retryAfter)
        }
        return AppleVerificationError(
            .httpStatus, "\(endpoint): HTTP \(response.status)", isRetriable: response.status >= 500 || response.status == 408,
            retryAfter: retryAfter)
    }

    /// Seconds from now. Apple documents `Retry-After` on the Server API as a UNIX time in milliseconds;
    /// HTTP's own form is a number of seconds. Both are accepted: a number past 10^12 is epoch
    /// milliseconds, past 10^9 epoch seconds, else a delay in seconds.
    static func retryAfterSeconds(_ value: String?, now: Date = Date()) -> Double? {
        guard let value, let number = Double(value.trimmingCharacters(in: .whitespaces)), number >= 0 else { return nil }
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
