import Dispatch
import Foundation
import Observability
import Synchronization

/// A dedicated thread that runs a librdkafka poll loop until stopped. Blocking polls never touch Swift's
/// cooperative pool.
final class PollThread: Sendable {
    private let running = Atomic<Bool>(true)
    private let exited = DispatchSemaphore(value: 0)

    var isRunning: Bool { running.load(ordering: .acquiring) }

    /// Starts `body` on a new thread. `body` should return soon after `isRunning` turns false.
    init(name: String, _ body: @escaping @Sendable (PollThread) -> Void) {
        NamedThread.start(name) { [self] in
            body(self)
            exited.signal()
        }
    }

    func stop() { running.store(false, ordering: .releasing) }

    /// Stops the loop and waits for the thread to leave it.
    func stopAndJoin() async {
        stop()
        await Blocking.run { [exited] in exited.wait() }
    }
}
