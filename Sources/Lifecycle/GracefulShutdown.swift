import Observability
import Synchronization

/// Told once that a graceful shutdown began; awaited by any number of tasks.
public final class GracefulShutdown: Sendable {
    private struct State {
        var triggered = false
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }
    private let state = Mutex(State())

    public init() {}

    /// The graceful shutdown of the service running in this task (set by ``ServiceGroup``; a service run alone
    /// gets one never triggered).
    @TaskLocal public static var current = GracefulShutdown()

    public var isTriggered: Bool { state.withLock { $0.triggered } }

    public func trigger() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard !state.triggered else { return [] }
            state.triggered = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Sleeps for `duration`, or less: until the shutdown is triggered or the task cancelled.
    public func sleep(for duration: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: duration) }
            group.addTask { await self.wait() }
            await group.next()
            group.cancelAll()
        }
    }

    /// Returns once the shutdown is triggered, or once the calling task is cancelled.
    public func wait() async {
        let id = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Cancelled before the continuation was kept: the handler found nothing to resume.
                let now = state.withLock { state -> Bool in
                    if state.triggered || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}

/// Runs `body`; once any of `shutdowns` is triggered, calls `stop` (which must make `body` return soon: a
/// runtime's `shutdown()`, a server's stop). What `body` returns or throws is returned or thrown.
public func withGracefulShutdown<T: Sendable>(
    of shutdowns: [GracefulShutdown], stop: @escaping @Sendable () -> Void, _ body: () async throws -> T
) async rethrows -> T {
    try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
        group.addTask {
            await firstOf(shutdowns)
            // Told to stop, even when cancelled meanwhile (a group cancels what it stops waiting for): `body` may
            // wait in a loop only `stop` ends. Not when `body` returned first, which cancels this watcher.
            if shutdowns.contains(where: \.isTriggered) { stop() }
        }
        do {
            let value = try await body()
            group.cancelAll()
            return value
        } catch {
            group.cancelAll()
            throw error
        }
    }
}
