import Foundation
import Observability
import Synchronization

/// Deadlines for many short waits at once (the notification receiver bounds each broker acknowledgement, the
/// ledger's health check its ping): one thread wakes every `resolution` and expires what is due, instead of a
/// sleeping task and a dispatch timer per wait, which cost the receiver a few percent of its CPU at thousands
/// of notifications a second. A deadline fires up to `resolution` late. The thread runs only while deadlines
/// are pending.
///
/// A thread of its own, not a task: the deadlines protect the worker when Swift's cooperative pool is busy
/// (a flood of notifications to verify) or blocked, and a sleeping task on that pool woke seconds late then.
///
/// Waits come in few lengths (5 s for the receiver, 2 s for a ledger ping): one queue per length is in
/// deadline order, so a sweep reads only what is due, however many waits are pending (a broker outage at
/// thousands of notifications a second leaves tens of thousands).
public final class DeadlineSweeper: Sendable {
    public static let shared = DeadlineSweeper(resolution: .milliseconds(50))

    /// Deadlines of one length, in the order scheduled: oldest first.
    private struct Queue {
        var entries: [(deadline: ContinuousClock.Instant, id: UInt64)] = []
        var head = 0

        mutating func append(_ deadline: ContinuousClock.Instant, _ id: UInt64) { entries.append((deadline, id)) }

        /// Removes and returns the ids due at `now`.
        mutating func takeDue(at now: ContinuousClock.Instant) -> [UInt64] {
            var due: [UInt64] = []
            while head < entries.count, entries[head].deadline <= now {
                due.append(entries[head].id)
                head += 1
            }
            if head > 1_024 && head * 2 > entries.count {
                entries.removeFirst(head)
                head = 0
            }
            return due
        }
    }

    private struct State {
        var lastID: UInt64 = 0
        /// What `cancel` removes; an id in a queue but not here was cancelled.
        var pending: [UInt64: @Sendable () -> Void] = [:]
        var queues: [Duration: Queue] = [:]
        var sweeping = false
    }

    private let state = Mutex(State())
    private let resolution: Duration

    package init(resolution: Duration) { self.resolution = resolution }

    /// Calls `expire` once `delay` has passed, unless `cancel` with the returned id came first.
    public func schedule(after delay: Duration, _ expire: @escaping @Sendable () -> Void) -> UInt64 {
        let deadline = ContinuousClock.now + delay
        let (id, start) = state.withLock { state in
            state.lastID &+= 1
            state.pending[state.lastID] = expire
            // Taken out and put back: a change through the defaulted subscript allocated its accessor's frame.
            var queue = state.queues.removeValue(forKey: delay) ?? Queue()
            queue.append(deadline, state.lastID)
            state.queues[delay] = queue
            defer { state.sweeping = true }
            return (state.lastID, !state.sweeping)
        }
        if start {
            NamedThread.start("deadlines") { [self] in sweep() }
        }
        return id
    }

    public func cancel(_ id: UInt64) {
        _ = state.withLock { $0.pending.removeValue(forKey: id) }
    }

    private func sweep() {
        let seconds = resolution.inSeconds
        while true {
            Thread.sleep(forTimeInterval: seconds)
            let now = ContinuousClock.now
            let (due, idle) = state.withLock { state -> ([@Sendable () -> Void], Bool) in
                var due: [@Sendable () -> Void] = []
                for delay in Array(state.queues.keys) {
                    for id in state.queues[delay]!.takeDue(at: now) {
                        if let expire = state.pending.removeValue(forKey: id) { due.append(expire) }
                    }
                }
                guard state.pending.isEmpty else { return (due, false) }
                // Idle: the queues hold only cancelled ids; their storage goes with them. The next
                // `schedule` starts a new sweep.
                state.pending = [:]
                state.queues = [:]
                state.sweeping = false
                return (due, true)
            }
            for expire in due { expire() }
            if idle { return }
        }
    }
}

/// Runs `body`, but returns (throwing `timeout`) after `deadline` whether it finished or not; it then finishes
/// in the background. For callers that must answer in time (a health check, Apple waiting for its answer).
public func withDeadline(
    _ deadline: Duration, timeout: any Error, _ body: @escaping @Sendable () async throws -> Void
) async throws {
    let failure: (any Error)? = await withCheckedContinuation { continuation in
        let answer = ResumeOnce(continuation)
        let timer = DeadlineSweeper.shared.schedule(after: deadline) { answer.resume(timeout) }
        Task {
            do {
                try await body()
                answer.resume(nil)
            } catch { answer.resume(error) }
            DeadlineSweeper.shared.cancel(timer)
        }
    }
    if let failure { throw failure }
}

/// Resumes a continuation once, with whichever answer comes first.
private final class ResumeOnce: Sendable {
    private let continuation: Mutex<CheckedContinuation<(any Error)?, Never>?>

    init(_ continuation: CheckedContinuation<(any Error)?, Never>) { self.continuation = Mutex(continuation) }

    func resume(_ value: (any Error)?) {
        continuation.withLock { $0.take() }?.resume(returning: value)
    }
}
