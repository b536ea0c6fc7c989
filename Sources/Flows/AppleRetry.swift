import AppleVerification
public import Messaging

/// The one loop in which Apple is asked again, for every call the worker makes to Apple: a job's verification, a
/// consumption answer, a command's or a chore's call. The loop keeps the count (a round that failed counts as an
/// attempt even when it sent nothing, an open circuit's answer: a flow's budget of rounds always ends) and waits
/// the retry policy's backoff, never sooner than the flow asks (Apple's `Retry-After`). What is worth asking again,
/// and what a flow answers when it stops, is the flow's own (`failed`), beside its other rules.
package struct AppleRetry {
    package var policy: RetryPolicy
    /// The wait between rounds: a job's (`HandlingContext.sleep`, cut short when the job is let go) or a plain one.
    package var sleep: (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    /// Whether a job is being let go (the worker stopping, its partition lost): a failure then says nothing about
    /// the purchase, and ``LetGo`` is thrown instead of asking again.
    package var letGo: () -> Bool = { false }

    /// What a flow does after a failed round.
    package enum Next<Stop> {
        /// Ask again after the policy's backoff, and not sooner than `after` (Apple's `Retry-After`, which the
        /// policy's `maxBackoff` bounds).
        case retry(after: Duration?)
        /// Ask again after the policy's backoff, and never sooner than `minimum`, however short `maxBackoff` is: a
        /// wait the contract promises (verifyReceipt's 21002 asked again over seconds, not milliseconds).
        case retryNoSoonerThan(Duration)
        /// Ask no more: the flow's answer.
        case stop(Stop)
    }

    /// How the rounds ended.
    package enum Ended<Answer, Stop> {
        case answered(Answer)
        case stopped(Stop)
    }

    /// Rounds of `round` until one answers or `failed` stops. `round` and `failed` see the attempts so far
    /// (`round` adds the HTTP calls it made).
    package func run<Answer, Stop>(
        attempts: inout Int, _ round: (inout Int) async throws -> Answer,
        failed: (_ error: any Error, _ attempts: Int) throws -> Next<Stop>
    ) async throws -> Ended<Answer, Stop> {
        while true {
            let before = attempts
            do {
                return .answered(try await round(&attempts))
            } catch {
                if letGo() { throw LetGo() }
                attempts = max(attempts, before + 1)
                switch try failed(error, attempts) {
                case .stop(let stop): return .stopped(stop)
                case .retry(let after): try await sleep(policy.delay(afterAttempts: attempts, retryAfter: after))
                case .retryNoSoonerThan(let minimum):
                    try await sleep(max(minimum, policy.delay(afterAttempts: attempts, retryAfter: nil)))
                }
            }
        }
    }
}

extension RetryPolicy {
    /// One App Store Server API call made outside a job (a command, Finish Transaction), retried on Apple's
    /// transient failures as a job's calls are, for `maxAttempts` rounds at most (never a circuit breaker's
    /// doubling cooldowns); any other error is thrown at once. `call` counts the HTTP calls it makes in its
    /// argument.
    public func retryingApple<T>(_ call: (inout Int) async throws -> T) async throws -> T {
        var attempts = 0
        let ended: AppleRetry.Ended<T, Never> = try await AppleRetry(policy: self).run(attempts: &attempts, call) {
            error, attempts in
            guard let apple = error as? AppleVerificationError, apple.isRetriable, mayRetry(afterAttempts: attempts)
            else { throw error }
            return .retry(after: apple.retryDelay)
        }
        switch ended {
        case .answered(let value): return value
        }
    }
}
