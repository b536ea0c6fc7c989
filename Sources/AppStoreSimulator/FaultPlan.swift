import Foundation

/// Faults the simulator injects into Apple's endpoints (never into the admin API).
struct FaultPlan: Sendable, Codable {
    /// Fixed latency added to every answer.
    var latencyMs: Double = 0
    /// Extra latency, exponentially distributed with this mean (a long tail like Apple's).
    var latencyJitterMs: Double = 0
    /// Share of requests answered with HTTP `errorStatus`.
    var errorRate: Double = 0
    var errorStatus: Int = 503
    /// Share of verifyReceipt requests answered with status 21005 (server unavailable).
    var status21005Rate: Double = 0
    /// Share of requests answered 429 with `Retry-After`.
    var rateLimitRate: Double = 0
    var retryAfterSeconds: Double = 1
    /// When set, 429s carry this `Retry-After` text as it is (hostile values: `inf`, a date in 3000, ...).
    var retryAfterHeader: String?
    /// Share of requests answered HTTP 200 with a body that is not JSON (a proxy's error page).
    var garbageRate: Double = 0
    /// Share of connections dropped without an answer.
    var dropRate: Double = 0
    /// Share of App Store Server API requests answered with Apple's retryable error `apiErrorCode`
    /// (4040002, 4040004 or 4040006 as 404; 5000001 as 500). verifyReceipt is not affected.
    var apiErrorRate: Double = 0
    var apiErrorCode: Int = 4040004
    /// Apple's rate limit: at most this many requests of one Server API endpoint and environment in any
    /// second; more get 429 with `Retry-After` (a UNIX time in milliseconds) when the window frees up.
    var rateLimitPerSecond: Int?
    /// An outage: from `outageStart` for `outageSeconds`, every request fails with `outageMode`.
    var outageStart: Date?
    var outageSeconds: Double = 0
    /// "http_5xx", "status_21005", "status_21002" (verifyReceipt's "malformed, or a temporary issue"),
    /// "rate_limited" or "drop".
    var outageMode: String = "http_5xx"
    /// When set, the faults and the rate limit apply to this app's requests only (one game failing or
    /// rate-limited beside another).
    var bundleID: String?

    enum CodingKeys: String, CodingKey {
        case latencyMs = "latency_ms", latencyJitterMs = "latency_jitter_ms", errorRate = "error_rate"
        case errorStatus = "error_status", status21005Rate = "status_21005_rate", rateLimitRate = "rate_limit_rate"
        case retryAfterSeconds = "retry_after_seconds", dropRate = "drop_rate", outageStart = "outage_start"
        case retryAfterHeader = "retry_after_header", garbageRate = "garbage_rate"
        case outageSeconds = "outage_seconds", outageMode = "outage_mode", rateLimitPerSecond = "rate_limit_per_second"
        case apiErrorRate = "api_error_rate", apiErrorCode = "api_error_code", bundleID = "bundle_id"
    }

    enum Fault {
        case none, httpError(Int), status21005, status21002, rateLimited(Double), drop, garbage, apiError(Int)
    }

    func delay() -> Duration {
        var milliseconds = latencyMs
        if latencyJitterMs > 0 { milliseconds += -latencyJitterMs * log(1 - Double.random(in: 0..<1)) }
        // A test's plan may say anything: at most an hour, never a trap.
        return .microseconds(Int64(exactly: (min(max(milliseconds, 0), 3_600_000) * 1000).rounded()) ?? 0)
    }

    func draw(now: Date = Date()) -> Fault {
        if let outageStart, now >= outageStart, now.timeIntervalSince(outageStart) < outageSeconds {
            switch outageMode {
            case "status_21005": return .status21005
            case "status_21002": return .status21002
            case "drop": return .drop
            // Apple's 429 until the outage ends, saying so in Retry-After.
            case "rate_limited": return .rateLimited(outageSeconds - now.timeIntervalSince(outageStart))
            default: return .httpError(errorStatus)
            }
        }
        let roll = Double.random(in: 0..<1)
        if roll < dropRate { return .drop }
        if roll < dropRate + errorRate { return .httpError(errorStatus) }
        if roll < dropRate + errorRate + rateLimitRate { return .rateLimited(retryAfterSeconds) }
        if roll < dropRate + errorRate + rateLimitRate + status21005Rate { return .status21005 }
        if roll < dropRate + errorRate + rateLimitRate + status21005Rate + garbageRate { return .garbage }
        if roll < dropRate + errorRate + rateLimitRate + status21005Rate + garbageRate + apiErrorRate {
            return .apiError(apiErrorCode)
        }
        return .none
    }
}
