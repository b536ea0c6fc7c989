import Synchronization

/// Whether the receiver's records reach the broker: a produce refused (an ACL, a partition without a leader,
/// the broker away) makes the receiver unready for a while, so a load balancer sends Apple's next deliveries
/// to a receiver that can store them. Ready again after `window` without a new failure, or at the next record
/// that reaches the broker: readiness must not stay false for a fault that healed while no record came.
package final class DeliveryHealth: Sendable {
    private let state = Mutex<(at: ContinuousClock.Instant, error: String)?>(nil)
    package let window: Duration

    package init(window: Duration = .seconds(30)) { self.window = window }

    package func succeeded() { state.withLock { $0 = nil } }

    package func failed(_ error: String) { state.withLock { $0 = (.now, error) } }

    /// Why the last record did not reach the broker, while that is recent; nil otherwise.
    package var problem: String? {
        state.withLock { last in
            guard let last, ContinuousClock.now - last.at < window else { return nil }
            return "the broker did not take the last notification: \(last.error)"
        }
    }
}
