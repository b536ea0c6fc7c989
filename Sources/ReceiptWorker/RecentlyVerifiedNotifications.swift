import Synchronization

/// Notifications this process's receiver verified and the broker took, kept for this process's own processing
/// of the same records: the processor then takes the receiver's result instead of checking both signatures
/// again (half of a notification's cryptography when one replica both receives and processes it).
///
/// Keyed by the SHA-256 of the record's value, the body exactly as received: only the bytes verified here
/// match, and a record anyone else wrote to the topic is verified as before. Each is taken once. At most
/// `capacity` are kept (4,096 by default, a few megabytes: two seconds of a burst the processor trails), the
/// oldest leaving first: a record another replica processes is never taken here, and a processor far behind
/// its receiver verifies again.
final class RecentlyVerifiedNotifications: Sendable {
    private struct State {
        var byDigest: [[UInt8]: AppleNotification] = [:]
        /// Insertion order, as a ring: the digest in each slot leaves when the slot is reused.
        var ring: [[UInt8]?]
        var next = 0
    }

    private let state: Mutex<State>

    init(capacity: Int = 4096) {
        state = Mutex(State(ring: Array(repeating: nil, count: max(1, capacity))))
    }

    /// After the broker acknowledged the record: its value's notification, as verified.
    func remember(value: [UInt8], _ notification: AppleNotification) {
        let digest = SHA256Digest.hash(value)
        state.withLock { state in
            if let leaving = state.ring[state.next] { state.byDigest[leaving] = nil }
            state.ring[state.next] = digest
            state.next = (state.next + 1) % state.ring.count
            state.byDigest[digest] = notification
        }
    }

    /// The notification this process verified with exactly these bytes, once; nil for anything else.
    func take(value: [UInt8]) -> AppleNotification? {
        let digest = SHA256Digest.hash(value)
        return state.withLock { $0.byDigest.removeValue(forKey: digest) }
    }

    var count: Int { state.withLock { $0.byDigest.count } }
}
