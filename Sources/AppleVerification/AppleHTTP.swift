package import Foundation
import HTTPClient
import Observability

/// Told of every HTTP call to Apple: the call (`verify_receipt_production`, `verify_receipt_sandbox`,
/// `transaction_info_production`, `transaction_info_sandbox`), its outcome (`ok`, `rate_limited`,
/// `http_4xx`, `http_5xx`, `timeout`, `transport_error`) and how long it took. Called on the HTTP client's
/// thread: it must be quick.
public typealias AppleCallObserver = @Sendable (_ call: String, _ outcome: String, _ duration: Duration) -> Void

/// What the Apple clients share about HTTP: transport errors and statuses mapped to
/// ``AppleVerificationError`` with Apple's transient set, and `Retry-After` read both ways Apple is seen to send it.
package enum AppleHTTP {
    /// Makes one call. `observe` (for metrics) learns how long it took and how it ended; `call` names the
    /// endpoint and environment there (`verify_receipt_production`, ...).
    /// `breakers`: the call waits while its breaker is open (waiting is not an attempt); a call that gets no
    /// answer counts against it here; the caller reports an answer's verdict with ``record(_:answered:)``.
    static func execute(
        _ request: HTTPRequest, with http: HTTPClient, endpoint: String, call: String, observe: AppleCallObserver?,
        breakers: CircuitBreakers? = nil
    ) async throws -> HTTPResponse {
        var trial = false
        if let breaker = breakers?.breaker(for: call) {
            trial = await breaker.waitUntilCallsAllowed()
            if Task.isCancelled {
                if trial { breaker.recordNeither() }
                throw CancellationError()
            }
        }
        let started = ContinuousClock.now
        do {
            let response = try await http.execute(request)
            observe?(call, outcome(status: response.status), ContinuousClock.now - started)
            return response
        } catch let error as HTTPClientError {
            guard error.kind != .cancelled else {
                // The worker let the job go (its partition released, a stop): nothing said of Apple either way, and
                // a trial given back at once, never held for the trial's timeout while Apple recovers.
                if trial { breakers?.breaker(for: call).recordNeither() }
                throw AppleVerificationError(.transport, "\(endpoint): \(error.reason)", isRetriable: false)
            }
            breakers?.breaker(for: call).record(success: false)
            observe?(call, error.kind == .timeout ? "timeout" : "transport_error", ContinuousClock.now - started)
            let code: AppleVerificationError.Code = error.kind == .timeout ? .timeout : .transport
            // Any failure to get an answer is transient for the job: Apple may answer next time.
            throw AppleVerificationError(code, "\(endpoint): \(error.reason)", isRetriable: true)
        }
    }

    /// Tells `call`'s breaker how an answered call went: Apple failing (a 5xx, a 408, a retryable status or
    /// error code, a body that is not Apple's) or Apple answering (anything else, a 429 included).
    static func record(_ breakers: CircuitBreakers?, _ call: String, failed: Bool) {
        breakers?.breaker(for: call).record(success: !failed)
    }

    /// A call whose answer says nothing of Apple's health (``CircuitBreaker/recordNeither()``).
    static func recordNeither(_ breakers: CircuitBreakers?, _ call: String) {
        breakers?.breaker(for: call).recordNeither()
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

    /// An error for a non-success HTTP status without a usable Apple error body. `maximumRetryAfter` bounds
    /// the wait a `Retry-After` may ask for.
    static func statusError(_ response: HTTPResponse, endpoint: String, maximumRetryAfter: Duration)
        -> AppleVerificationError
    {
        let retryAfter = retryAfter(response.header("retry-after"), maximum: maximumRetryAfter)
        if response.status == 429 {
            return AppleVerificationError(
                .rateLimited, "\(endpoint): rate limited (HTTP 429)", isRetriable: true, retryAfter: retryAfter)
        }
        return AppleVerificationError(
            .httpStatus, "\(endpoint): HTTP \(response.status)",
            isRetriable: response.status >= 500 || response.status == 408,
            retryAfter: retryAfter)
    }

    /// A `Retry-After` header as a wait from `now`, from zero to `maximum`; nil when absent or unreadable.
    ///
    /// Apple documents `Retry-After` on the Server API as a UNIX time in milliseconds; HTTP's own forms are a
    /// number of seconds and an HTTP-date, and proxies send those. A number of 10^12 or more is epoch
    /// milliseconds, from 10^9 epoch seconds, below that a delay in seconds; a time already past is a wait
    /// of zero. The header comes from whatever answered, so it is read as hostile: only digits (with an
    /// optional fraction) are a number, so `inf`, `nan`, `1e300` and `-5` are unreadable, and a huge number
    /// or a date centuries away waits `maximum`, never longer.
    package static func retryAfter(_ value: String?, now: Date = Date(), maximum: Duration) -> Duration? {
        guard let value else { return nil }
        let text = value.trimmingCharacters(in: .whitespaces)
        let seconds: Double
        if let number = decimal(text) {
            if number >= 1e12 {
                seconds = number / 1000 - now.timeIntervalSince1970
            } else if number >= 1e9 {
                seconds = number - now.timeIntervalSince1970
            } else {
                seconds = number
            }
        } else if let date = httpDate(text) {
            seconds = date.timeIntervalSince(now)
        } else {
            return nil
        }
        return clamp(seconds: seconds, maximum: maximum)
    }

    /// `seconds` as a `Duration` in 0...`maximum`, converted only once it is known to fit. Infinity (a
    /// number with hundreds of digits reads as one) is past any maximum; NaN is no time.
    static func clamp(seconds: Double, maximum: Duration) -> Duration? {
        guard !seconds.isNaN, seconds != -.infinity else { return nil }
        let ceiling = max(maximum, .zero)
        let ceilingSeconds = ceiling.inSeconds
        guard seconds > 0 else { return .zero }
        guard seconds < ceilingSeconds, let milliseconds = Int64(exactly: (seconds * 1000).rounded(.up)) else {
            return ceiling
        }
        return min(.milliseconds(milliseconds), ceiling)
    }

    /// A non-negative decimal number (digits, an optional fraction); nil for anything else `Double` would read.
    private static func decimal(_ text: String) -> Double? {
        guard let first = text.utf8.first, first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") else { return nil }
        var digits = 0
        var sawPoint = false
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digits += 1
            case UInt8(ascii: ".") where !sawPoint: sawPoint = true
            default: return nil
            }
        }
        guard digits > 0, text.utf8.last != UInt8(ascii: ".") else { return nil }
        return Double(text)
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the HTTP-date form senders must use. Read by hand:
    /// the format is fixed, and a DateFormatter per header cost more than the rest of reading an answer.
    private static func httpDate(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == 0x20, bytes[7] == 0x20,
            bytes[11] == 0x20, bytes[16] == 0x20, bytes[19] == UInt8(ascii: ":"), bytes[22] == UInt8(ascii: ":"),
            bytes[25] == 0x20, bytes[26...].elementsEqual("GMT".utf8)
        else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for byte in bytes[range] {  // at most four digits: no sum can overflow
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int32(byte - UInt8(ascii: "0"))
            }
            return value
        }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let month = months.firstIndex(where: { bytes[8..<11].elementsEqual($0.utf8) }),
            let day = number(5..<7), let year = number(12..<16), let hour = number(17..<19),
            let minute = number(20..<22), let second = number(23..<25),
            (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = Int32(month)
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Date(timeIntervalSince1970: Double(timegm(&parts)))
    }
}
