import Synchronization

/// The in-flight budget (`worker.max_in_flight`): a job starts only with a slot, so the budget holds even
/// for messages librdkafka fetched before intake was paused.
final class JobSlots: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(_ count: Int) { state = Mutex(State(available: count)) }

    func acquire() async {
        await withCheckedContinuation { continuation in
            let granted = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if !state.waiters.isEmpty { return state.waiters.removeFirst() }
            state.available += 1
            return nil
        }
        waiter?.resume()
    }
}
