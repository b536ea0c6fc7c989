import Crypto
package import Events
import Synchronization

/// Notifications this process's receiver verified, kept for this process's own processing of the same
/// records: the processor then takes the receiver's result instead of checking both signatures again (half of
/// a notification's cryptography when one replica both receives and processes it).
///
/// Only the bytes verified here match: a record is looked up by a cheap fingerprint (its length and its last 32
/// bytes, inside the outer signature), then must have the SHA-256 the receiver kept. A record anyone else wrote to
/// the topic, or another replica received, is verified as before, and costs the processor no hash. Each result is
/// taken once. At most `capacity` are kept (1,024 by default; a result holds the decoded payload with its nested
/// signed data, about 15 KB, so at most about 15 MB), the oldest leaving first: with N replicas most results are
/// never taken here, and a processor far behind its receiver verifies again.
package final class RecentlyVerifiedNotifications: Sendable {
    private struct Fingerprint: Hashable {
        let count: Int
        let tail: [UInt8]

        init(_ value: [UInt8]) {
            count = value.count
            tail = Array(value.suffix(32))
        }
    }

    private struct Entry {
        let digest: [UInt8]
        let notification: AppleNotification
    }

    private struct State {
        var entries: [Fingerprint: Entry] = [:]
        /// Insertion order, as a ring: the fingerprint in each slot leaves when the slot is reused.
        var ring: [Fingerprint?]
        var next = 0
    }

    private let state: Mutex<State>

    package init(capacity: Int = 1024) {
        state = Mutex(State(ring: Array(repeating: nil, count: max(1, capacity))))
    }

    /// A verified notification and the record value it is produced as (before the broker answers: the
    /// processor may read the record before the receiver hears the acknowledgement).
    package func remember(value: [UInt8], _ notification: AppleNotification) {
        let entry = Entry(digest: SHA256Digest.hash(value), notification: notification)
        let fingerprint = Fingerprint(value)
        state.withLock { state in
            if let leaving = state.ring[state.next] { state.entries[leaving] = nil }
            state.ring[state.next] = fingerprint
            state.next = (state.next + 1) % state.ring.count
            state.entries[fingerprint] = entry
        }
    }

    /// The notification this process verified with exactly these bytes, once; nil for anything else.
    /// A record that only looks like one (its length and tail) leaves the result in place for the real one.
    package func take(value: [UInt8]) -> AppleNotification? {
        let fingerprint = Fingerprint(value)
        guard let kept = state.withLock({ $0.entries[fingerprint]?.digest }) else { return nil }
        let digest = SHA256Digest.hash(value)
        guard digest == kept else { return nil }
        return state.withLock { state in
            guard state.entries[fingerprint]?.digest == digest else { return nil }
            return state.entries.removeValue(forKey: fingerprint)?.notification
        }
    }

    package var count: Int { state.withLock { $0.entries.count } }
}
