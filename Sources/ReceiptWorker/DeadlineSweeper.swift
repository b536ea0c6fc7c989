import Synchronization

/// Deadlines for many short waits at once (the notification receiver bounds each broker acknowledgement):
/// one task wakes every `resolution` and expires what is due, instead of a sleeping task and a dispatch
/// timer per wait, which cost the receiver a few percent of its CPU at thousands of notifications a second.
/// A deadline fires up to `resolution` late. The task runs only while deadlines are pending.
final class DeadlineSweeper: Sendable {
    static let shared = DeadlineSweeper(resolution: .milliseconds(50))

    private struct Pending {
        let deadline: ContinuousClock.Instant
        let expire: @Sendable () -> Void
    }

    private struct State {
        var lastID: UInt64 = 0
        var pending: [UInt64: Pending] = [:]
        var sweeping = false
    }

    private let state = Mutex(State())
    private let resolution: Duration

    init(resolution: Duration) { self.resolution = resolution }

    /// Calls `expire` once `delay` has passed, unless `cancel` with the returned id came first.
    func schedule(after delay: Duration, _ expire: @escaping @Sendable () -> Void) -> UInt64 {
        let deadline = ContinuousClock.now + delay
        let (id, start) = state.withLock { state in
            state.lastID &+= 1
            state.pending[state.lastID] = Pending(deadline: deadline, expire: expire)
            defer { state.sweeping = true }
            return (state.lastID, !state.sweeping)
        }
        if start { Task.detached { await self.sweep() } }
        return id
    }

    func cancel(_ id: UInt64) {
        _ = state.withLock { $0.pending.removeValue(forKey: id) }
    }

    private func sweep() async {
        while true {
            try? await Task.sleep(for: resolution)
            let now = ContinuousClock.now
            let due: [Pending]? = state.withLock { state in
                guard !state.pending.isEmpty else {
                    state.sweeping = false
                    return nil
                }
                let due = state.pending.filter { $0.value.deadline <= now }
                for id in due.keys { state.pending.removeValue(forKey: id) }
                return Array(due.values)
            }
            guard let due else { return }
            for pending in due { pending.expire() }
        }
    }
}
