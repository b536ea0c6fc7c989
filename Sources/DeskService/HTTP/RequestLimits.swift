import Foundation
import Observability
import Synchronization

/// A bucket per agent: `perMinute` requests, refilled evenly; the oldest agents forgotten past 10,000.
final class AgentLimiter: Sendable {
    let perMinute: Int
    private let buckets = Mutex<[String: (tokens: Double, at: ContinuousClock.Instant)]>([:])

    init(perMinute: Int) { self.perMinute = perMinute }

    func take(_ subject: String, now: ContinuousClock.Instant = .now) -> Bool {
        buckets.withLock { buckets in
            if buckets.count > 10_000 { buckets.removeAll() }
            let capacity = Double(perMinute)
            var bucket = buckets[subject] ?? (capacity, now)
            bucket.tokens = min(capacity, bucket.tokens + (now - bucket.at).inSeconds * capacity / 60)
            bucket.at = now
            guard bucket.tokens >= 1 else {
                buckets[subject] = bucket
                return false
            }
            bucket.tokens -= 1
            buckets[subject] = bucket
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
