import Synchronization

/// The in-flight budget: `worker.max_in_flight` jobs and `worker.max_in_flight_bytes` bytes of job
/// messages. A job starts only within both, so the budget holds even for messages librdkafka fetched
/// before intake was paused, and memory is bounded by bytes, not only by count (a thousand 250 KB receipts
/// are a gigabyte once copied through verification). Waiters start in arrival order. A message larger than
/// the whole byte budget still starts, alone.
final class JobSlots: Sendable {
    private struct State {
        var jobs: Int
        var bytes: Int
        var waiters: [(bytes: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state: Mutex<State>
    private let totalBytes: Int

    init(jobs: Int, bytes: Int) {
        totalBytes = bytes
        state = Mutex(State(jobs: jobs, bytes: bytes))
    }

    /// Bytes of the jobs in flight now.
    var bytesInUse: Int { totalBytes - state.withLock { $0.bytes } }

    func acquire(bytes: Int) async {
        await withCheckedContinuation { continuation in
            let granted = state.withLock { state -> Bool in
                if state.waiters.isEmpty, fits(bytes, state) {
                    state.jobs -= 1
                    state.bytes -= bytes
                    return true
                }
                state.waiters.append((bytes, continuation))
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release(bytes: Int) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.jobs += 1
            state.bytes += bytes
            var ready: [CheckedContinuation<Void, Never>] = []
            while let first = state.waiters.first, fits(first.bytes, state) {
                state.waiters.removeFirst()
                state.jobs -= 1
                state.bytes -= first.bytes
                ready.append(first.continuation)
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    private func fits(_ bytes: Int, _ state: State) -> Bool {
        state.jobs > 0 && (bytes <= state.bytes || state.bytes == totalBytes)
    }
}
