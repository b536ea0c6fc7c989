/// When to try Apple again: exponential backoff with full jitter, never sooner than Apple's `Retry-After`.
public struct RetryPolicy: Sendable {
    /// Calls to Apple per job, the first included (`retry.max_attempts`). Default: 8.
    public var maxAttempts = 8
    /// `retry.initial_backoff_ms`. Default: 200 ms.
    public var initialBackoff: Duration = .milliseconds(200)
    /// `retry.max_backoff_ms`. Default: 30 s.
    public var maxBackoff: Duration = .seconds(30)

    public init() {}

    /// Whether a job that has made `attempts` calls may make another.
    public func mayRetry(afterAttempts attempts: Int) -> Bool { attempts < maxAttempts }

    /// The wait before the next call, after `attempts` calls: uniform in [0, min(max, initial × 2^(attempts-1))]
    /// ("full jitter", so retries of many jobs spread out), and at least `retryAfter` when Apple said, but
    /// never more than `maxBackoff`: a header saying "in a thousand years" must not park a job.
    public func delay(
        afterAttempts attempts: Int, retryAfter: Duration?, random: Double = .random(in: 0...1)
    ) -> Duration {
        let exponent = min(max(attempts - 1, 0), 30)
        let ceiling = min(maxBackoff, initialBackoff * (1 << exponent))
        let jittered = ceiling * min(max(random, 0), 1)
        guard let retryAfter, retryAfter > .zero else { return jittered }
        return max(jittered, min(retryAfter, maxBackoff))
    }
}
