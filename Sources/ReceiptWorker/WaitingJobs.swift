import Kafka
import Synchronization

/// Messages taken from the consumer that wait for a slot of the in-flight budget, in arrival order, for
/// the one task that starts jobs. The consumer's events are read without waiting for slots, so rebalances
/// are served and the poll thread keeps polling (and stays in the group) however long Apple keeps jobs
/// busy. Bounded: intake pauses the partitions when jobs in flight plus jobs waiting reach the budget.
final class WaitingJobs: Sendable {
    /// A message and the assignment of its partition it was read under.
    struct WaitingJob: Sendable {
        let message: KafkaMessage
        let generation: UInt64
    }

    private struct State {
        var messages: [WaitingJob] = []
        var head = 0
        var reader: CheckedContinuation<WaitingJob?, Never>?
        var finished = false
        var bytes = 0
    }

    private let state = Mutex(State())

    var count: Int { state.withLock { $0.messages.count - $0.head } }

    /// Bytes of the waiting messages' values.
    var bytes: Int { state.withLock { $0.bytes } }

    func append(_ job: WaitingJob) {
        let reader = state.withLock { state -> CheckedContinuation<WaitingJob?, Never>? in
            guard !state.finished else { return nil }
            if let reader = state.reader {
                state.reader = nil
                return reader
            }
            state.messages.append(job)
            state.bytes += job.message.value.count
            return nil
        }
        reader?.resume(returning: job)
    }

    /// The oldest waiting message; nil once finished.
    func next() async -> WaitingJob? {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> WaitingJob?? in
                if state.head < state.messages.count {
                    defer { compact(&state) }
                    state.head += 1
                    state.bytes -= state.messages[state.head - 1].message.value.count
                    return .some(state.messages[state.head - 1])
                }
                if state.finished { return .some(nil) }
                state.reader = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Forgets the waiting messages of revoked partitions: never started, so never committed past; the
    /// partitions' next owner reads them again.
    func remove(_ partitions: Set<KafkaTopicPartition>) {
        state.withLock { state in
            state.messages = state.messages[state.head...].filter { !partitions.contains($0.message.topicPartition) }
            state.head = 0
            state.bytes = state.messages.reduce(0) { $0 + $1.message.value.count }
        }
    }

    /// Ends ``next()`` for good (shutdown): what waits is left to be read again after the restart.
    func finish() {
        let reader = state.withLock { state -> CheckedContinuation<WaitingJob?, Never>? in
            state.finished = true
            state.messages.removeAll()
            state.head = 0
            state.bytes = 0
            defer { state.reader = nil }
            return state.reader
        }
        reader?.resume(returning: nil)
    }

    private func compact(_ state: inout State) {
        if state.head > 1024 && state.head * 2 > state.messages.count {
            state.messages.removeFirst(state.head)
            state.head = 0
        }
    }
}
