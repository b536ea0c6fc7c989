import Synchronization

/// Whether the receiver's records reach the broker: a produce refused (an ACL, a partition without a leader,
/// the broker away) makes the receiver unready for a while, so a load balancer sends Apple's next deliveries
/// to a receiver that can store them. Ready again after `window` without a new failure, or at the next record
/// that reaches the broker: readiness must not stay false for a fault that healed while no record came.
final class DeliveryHealth: Sendable {
    private let state = Mutex<(at: ContinuousClock.Instant, error: String)?>(nil)
    let window: Duration

    init(window: Duration = .seconds(30)) { self.window = window }

    func succeeded() { state.withLock { $0 = nil } }

    func failed(_ error: String) { state.withLock { $0 = (.now, error) } }

    /// Why the last record did not reach the broker, while that is recent; nil otherwise.
    var problem: String? {
        state.withLock { last in
            guard let last, ContinuousClock.now - last.at < window else { return nil }
            return "the broker did not take the last notification: \(last.error)"
        }
    }
}
