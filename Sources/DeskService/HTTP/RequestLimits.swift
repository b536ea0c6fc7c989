import Foundation
import Observability
import Synchronization

/// A bucket per agent: `perMinute` requests, refilled evenly; the oldest agents forgotten past 10,000.
final class AgentLimiter: Sendable {
    /// A request let through, or refused: the first refusal since the agent's last request let through, or one more.
    enum Take: Equatable {
        case allowed
        case refused(first: Bool)
    }

    let perMinute: Int
    private let buckets = Mutex<[String: Bucket]>([:])

    private struct Bucket {
        var tokens: Double
        var at: ContinuousClock.Instant
        /// Refused since the last request let through: the next refusal is not the first.
        var refusing = false
    }

    init(perMinute: Int) { self.perMinute = perMinute }

    func take(_ subject: String, now: ContinuousClock.Instant = .now) -> Take {
        buckets.withLock { buckets in
            if buckets.count > 10_000 { buckets.removeAll() }
            let capacity = Double(perMinute)
            var bucket = buckets[subject] ?? Bucket(tokens: capacity, at: now)
            bucket.tokens = min(capacity, bucket.tokens + (now - bucket.at).inSeconds * capacity / 60)
            bucket.at = now
            guard bucket.tokens >= 1 else {
                let first = !bucket.refusing
                bucket.refusing = true
                buckets[subject] = bucket
                return .refused(first: first)
            }
            bucket.tokens -= 1
            bucket.refusing = false
            buckets[subject] = bucket
            return .allowed
        }
    }
}

/// The `state` of each console sign-in whose callback came, until the sign-in would have expired: a callback
/// replayed with its state cookie is refused before the provider is asked (each ask sends the client's secret,
/// and a provider that throttles the client would keep the staff from signing in). This replica's only; past
/// 100,000 at once (a flood), the oldest half is forgotten.
final class UsedSignInStates: Sendable {
    private let used = Mutex<[String: Date]>([:])

    /// True the first time `state` comes (until `expiresAt`), false when it came before.
    func claim(_ state: String, until expiresAt: Date, now: Date) -> Bool {
        used.withLock { used in
            if used.count >= 100_000 {
                used = used.filter { $0.value > now }
                if used.count >= 100_000 {
                    let kept = used.sorted { $0.value > $1.value }.prefix(50_000)
                    used = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
                }
            }
            guard used[state].map({ $0 <= now }) ?? true else { return false }
            used[state] = expiresAt
            return true
        }
    }
}

/// How many requests are being answered.
final class InFlight: Sendable {
    private let count = Atomic<Int>(0)
    func enter() { count.add(1, ordering: .relaxed) }
    func leave() { count.subtract(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}
