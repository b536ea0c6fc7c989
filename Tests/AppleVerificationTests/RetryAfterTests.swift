import Foundation
import Testing

@testable import AppleVerification

/// `Retry-After` decides how long a job waits. Read from whatever answered (Apple, a proxy, an attacker on
/// an `http://` URL), it must never crash the worker nor park a job past the caller's maximum.
@Suite("Retry-After")
struct RetryAfterTests {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)  // Tue, 14 Nov 2023 22:13:20 GMT
    static let maximum: Duration = .seconds(30)

    @Test(
        "Apple's UNIX milliseconds, UNIX seconds, a delay in seconds, or an HTTP-date",
        arguments: [
            ("1700000002500", Duration.milliseconds(2500)), ("1700000003", .seconds(3)), ("7", .seconds(7)),
            ("7.25", .milliseconds(7250)), (" 12 ", .seconds(12)), ("0", .zero), ("1699999999000", .zero),
            ("Tue, 14 Nov 2023 22:13:25 GMT", .seconds(5)), ("Sun, 06 Nov 1994 08:49:37 GMT", .zero),
        ])
    func readable(header: String, wait: Duration) {
        #expect(AppleHTTP.retryAfter(header, now: Self.now, maximum: Self.maximum) == wait)
    }

    @Test(
        "what is no time is ignored (the usual backoff applies)",
        arguments: ["inf", "nan", "1e300", "-5", "-1700000000000", "0x10", "", "soon", "1.", ".5", "+5", "1e3"])
    func unreadable(header: String) {
        #expect(AppleHTTP.retryAfter(header, now: Self.now, maximum: Self.maximum) == nil)
    }

    @Test(
        "a wait past the maximum, a huge number or a date centuries away, waits the maximum",
        arguments: [
            "120", "99999999999999999999999999", "1700000000000000000", String(repeating: "9", count: 400),
            "2700000000000", "Sun, 06 Nov 2794 08:49:37 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
        ])
    func clamped(header: String) {
        #expect(AppleHTTP.retryAfter(header, now: Self.now, maximum: Self.maximum) == Self.maximum)
    }

    @Test("the error's wait in seconds is finite and within the maximum, so the worker can convert it")
    func errorWait() throws {
        for header in ["1e300", "inf", String(repeating: "9", count: 400), "Fri, 31 Dec 9999 23:59:59 GMT"] {
            let error = AppleVerificationError(
                .rateLimited, "rate limited", isRetriable: true,
                retryAfter: AppleHTTP.retryAfter(header, now: Self.now, maximum: Self.maximum))
            if let seconds = error.retryAfter {
                #expect(seconds.isFinite && seconds >= 0 && seconds <= 30)
                #expect(Int64(exactly: (seconds * 1000).rounded()) != nil)
            }
        }
        #expect(AppleHTTP.retryAfter("5", now: Self.now, maximum: .seconds(-1)) == .zero)
        #expect(AppleHTTP.clamp(seconds: .nan, maximum: Self.maximum) == nil)
        #expect(AppleHTTP.clamp(seconds: .infinity, maximum: Self.maximum) == Self.maximum)
        #expect(AppleHTTP.clamp(seconds: 1e300, maximum: .seconds(Int64.max)) == .seconds(Int64.max))
    }
}
