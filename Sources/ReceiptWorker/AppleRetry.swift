import AppleVerification
import Runtime

extension RetryPolicy {
    /// One App Store Server API call made outside a job (a command, Finish Transaction), retried on Apple's
    /// transient failures as a job's calls are. Every round counts as an attempt, also one that sent nothing (an
    /// open circuit answered it): the caller waits `maxAttempts` rounds at most, never a circuit breaker's doubling
    /// cooldowns. `call` counts the HTTP calls it makes in its argument.
    public func retryingApple<T>(_ call: (inout Int) async throws -> T) async throws -> T {
        var attempts = 0
        while true {
            let before = attempts
            do {
                return try await call(&attempts)
            } catch let error as AppleVerificationError where error.isRetriable {
                attempts = max(attempts, before + 1)
                guard mayRetry(afterAttempts: attempts) else { throw error }
                try await Task.sleep(for: delay(afterAttempts: attempts, retryAfter: error.retryDelay))
            }
        }
    }
}
