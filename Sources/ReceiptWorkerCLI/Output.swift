import Foundation
import Synchronization

/// A boolean that one thread sets and another reads; a class so escaping closures can share it.
final class AtomicFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

/// Writes one line to standard output at once (unbuffered), so a pipe or a terminal sees results as they come.
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Writes "receipt-worker: MESSAGE" to standard error: problems, never results.
func complain(_ message: String) {
    FileHandle.standardError.write(Data("receipt-worker: \(message)\n".utf8))
}

/// Calls `stalled` once when ``moved()`` has not been called for `stallSeconds`, checked every second on a thread
/// of Dispatch's, until ``stop()``. Between ``hold()`` and the next ``moved()`` (the command waits on something with
/// a deadline of its own, a send) it never fires.
final class ProgressWatch: Sendable {
    private let last = Mutex<ContinuousClock.Instant?>(ContinuousClock.now)
    private let stopped = AtomicFlag()

    init(stallSeconds: Int, stalled: @escaping @Sendable () -> Void) {
        check(after: .seconds(stallSeconds), stalled)
    }

    func moved() { last.withLock { $0 = ContinuousClock.now } }

    func hold() { last.withLock { $0 = nil } }

    func stop() { stopped.set() }

    private func check(after limit: Duration, _ stalled: @escaping @Sendable () -> Void) {
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(1)) { [self] in
            guard !stopped.isSet else { return }
            if let last = last.withLock({ $0 }), ContinuousClock.now - last > limit {
                stopped.set()
                stalled()
            } else {
                check(after: limit, stalled)
            }
        }
    }
}
