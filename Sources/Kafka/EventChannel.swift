import Dispatch
import Synchronization

/// Hands batches from one blocking producer thread to one async reader, holding at most `capacity`
/// batches. A full channel blocks the producer thread (the poll thread), never the reader: memory stays
/// bounded however slowly the reader goes.
final class EventChannel<Element: Sendable>: Sendable {
    private struct State: ~Copyable {
        var buffer: [[Element]] = []
        var waiter: CheckedContinuation<[Element]?, Never>?
        var finished = false
    }

    private enum Outcome { case finished, buffered, handedTo(CheckedContinuation<[Element]?, Never>) }
    private enum Taken { case batch([Element]), finished, wait }

    private let state = Mutex(State())
    private let slots: DispatchSemaphore

    init(capacity: Int) {
        precondition(capacity > 0)
        // Created at zero and raised by hand: libdispatch aborts when a semaphore is freed below the value
        // it was created with, which a channel dropped while full would be.
        slots = DispatchSemaphore(value: 0)
        for _ in 0..<capacity { slots.signal() }
    }

    /// Blocks until there is room, then hands `batch` over. Returns false once the channel is finished.
    /// Call from a dedicated thread only.
    @discardableResult
    func push(_ batch: [Element]) -> Bool {
        while slots.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
            if isFinished { return false }
        }
        let outcome: Outcome = state.withLock { state in
            if state.finished { return .finished }
            if let waiter = state.waiter {
                state.waiter = nil
                return .handedTo(waiter)
            }
            state.buffer.append(batch)
            return .buffered
        }
        switch outcome {
        case .buffered:
            return true
        case .finished:
            slots.signal()
            return false
        case .handedTo(let waiter):
            slots.signal()  // handed straight to the reader: no slot stays held
            waiter.resume(returning: batch)
            return true
        }
    }

    /// The next batch, or nil once finished or when the reading task is cancelled. One reader at a time.
    func next() async -> [Element]? {
        let fast: Taken = state.withLock { state in
            if !state.buffer.isEmpty { return .batch(state.buffer.removeFirst()) }
            return state.finished ? .finished : .wait
        }
        switch fast {
        case .batch(let batch):
            slots.signal()
            return batch
        case .finished:
            return nil
        case .wait:
            return await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let immediate: [Element]?? = state.withLock { state in
                        if !state.buffer.isEmpty { return .some(state.buffer.removeFirst()) }
                        if state.finished || Task.isCancelled { return .some(nil) }
                        state.waiter = continuation
                        return .none
                    }
                    if let immediate {
                        if immediate != nil { slots.signal() }
                        continuation.resume(returning: immediate)
                    }
                }
            } onCancel: {
                // Like AsyncStream: a cancelled reader gets nil; the channel itself stays open.
                let waiter = state.withLock { state in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume(returning: nil)
            }
        }
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// Ends the channel: the reader gets nil, buffered batches are dropped, a blocked producer returns.
    func finish() {
        let waiter: CheckedContinuation<[Element]?, Never>? = state.withLock { state in
            state.finished = true
            state.buffer.removeAll()
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }
}
