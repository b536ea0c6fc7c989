import Dispatch
import Foundation
import Observability
import Synchronization

/// A thread of its own that runs blocking calls in order: one per database connection (each of PostgreSQL's pool,
/// the SQLite ledger's one).
///
/// Blocking calls on Dispatch's global queues (or Swift's cooperative pool) share a few threads: on Linux
/// libdispatch adds threads for blocked work only slowly, so eight connections ran about as few calls at
/// once as there were pool threads free, and jobs queued for the ledger (measured: 75 ms at the median
/// during a burst). A dedicated thread per connection makes the pool size the real concurrency.
final class BlockingThread: Sendable {
    private let work = Mutex<(queue: [@Sendable () -> Void], stopping: Bool)>(([], false))
    private let ready = DispatchSemaphore(value: 0)

    init(name: String) {
        NamedThread.start(name) { [self] in
            while true {
                ready.wait()
                let (next, stop) = work.withLock { work in
                    (work.queue.isEmpty ? nil : work.queue.removeFirst(), work.stopping && work.queue.isEmpty)
                }
                next?()
                if stop { return }
            }
        }
    }

    /// Runs `body` on this thread, after what was submitted before, and returns its result; once stopped, throws
    /// at once (`closed`).
    func perform<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let accepted = work.withLock { work in
                guard !work.stopping else { return false }
                work.queue.append { continuation.resume(with: Result { try body() }) }
                return true
            }
            guard accepted else { return continuation.resume(throwing: LedgerError(.closed, "the ledger is closed")) }
            ready.signal()
        }
    }

    /// Ends the thread once what was submitted has run.
    func stop() {
        work.withLock { $0.stopping = true }
        ready.signal()
    }
}
