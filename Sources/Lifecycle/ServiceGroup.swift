public import Observability
import Synchronization

/// A long-running part of a process: the consumer runtime, an HTTP endpoint, a periodic chore. Every one has the
/// same shape (swift-service-lifecycle's `Service`): `run()` returns when its work is done, when the graceful
/// shutdown of its group reaches it (``GracefulShutdown/current``: finish what was taken, then return), or at
/// once when its task is cancelled. Throwing stops the whole group.
public protocol Service: Sendable {
    func run() async throws
}

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

/// Runs services together: all start in order; on ``shutdown()`` (SIGTERM) they stop in reverse order, each one's
/// graceful shutdown triggered and awaited before the next's, so the last started (what takes traffic) stops
/// first and the first started (the metrics port, what reports on the rest) last. A service that ends on its
/// own, or throws, stops the others the same way; its error is what ``run()`` throws. Cancelling ``run()``'s task
/// cancels every service.
///
/// A process's parts are one group, one level: what can only be made once an earlier part runs (a worker, made
/// once its ledger opened, while the metrics port already answers) is an entry made ``Entry/later(_:_:)``, whose
/// services join the group where it stands.
public final class ServiceGroup: Sendable {
    public struct Entry: Sendable {
        public let name: String
        let kind: Kind

        enum Kind: Sendable {
            case service(any Service)
            case later(@Sendable () async throws -> [Entry])
        }

        public init(_ name: String, _ service: any Service) {
            self.name = name
            kind = .service(service)
        }

        /// Services known only once `make` returns: they start in its place, and the entries after it once they
        /// have. `make` runs with a graceful shutdown of its own (``GracefulShutdown/current``), triggered, and its
        /// task cancelled, when the group stops meanwhile; nothing more starts then. Its throw stops the group as a
        /// failing service's does.
        public static func later(_ name: String, _ make: @escaping @Sendable () async throws -> [Entry]) -> Entry {
            Entry(name: name, kind: .later(make))
        }

        private init(name: String, kind: Kind) {
            self.name = name
            self.kind = kind
        }
    }

    /// The services started, in order: each one's shutdown, and how it ended (nil: running; .some(nil): returned).
    private final class Started: Sendable {
        private struct Service {
            let shutdown = GracefulShutdown()
            var ended: (any Error)??
        }
        private let services = Mutex<[Service]>([])

        /// A new service's place and its shutdown.
        func start() -> (index: Int, shutdown: GracefulShutdown) {
            services.withLock { services in
                services.append(Service())
                return (services.count - 1, services[services.count - 1].shutdown)
            }
        }

        func end(_ index: Int, _ failure: (any Error)?) { services.withLock { $0[index].ended = .some(failure) } }
        func hasEnded(_ index: Int) -> Bool { services.withLock { $0[index].ended != nil } }
        func shutdown(_ index: Int) -> GracefulShutdown { services.withLock { $0[index].shutdown } }
        var count: Int { services.withLock { $0.count } }
        /// The first failure, in start order (a later one failing in its stop is an effect, not a cause).
        var firstFailure: (any Error)? {
            services.withLock { services in services.lazy.compactMap { $0.ended ?? nil }.first }
        }
    }

    private let entries: [Entry]
    private let logger: Logger
    private let shutdownRequested = GracefulShutdown()

    public init(_ entries: [Entry], logger: Logger) {
        self.entries = entries
        self.logger = logger
    }

    /// Begins the graceful shutdown (from a signal handler's thread, or anywhere).
    public func shutdown() { shutdownRequested.trigger() }

    public func run() async throws {
        let started = Started()
        let finished = GracefulShutdown()  // triggered by the first service to end on its own
        try await withThrowingTaskGroup(of: Void.self) { group in
            var queue = entries[...]
            var stopping = false
            while !stopping, let entry = queue.popFirst() {
                // Nothing starts once a stop came: a SIGTERM while the ledger opened, a service ending on its own.
                if shutdownRequested.isTriggered || finished.isTriggered {
                    logger.notice("stopped while starting", ["service": entry.name])
                    break
                }
                switch entry.kind {
                case .service(let service):
                    let (index, shutdown) = started.start()
                    group.addTask { [logger] in
                        var failure: (any Error)?
                        do {
                            try await GracefulShutdown.$current.withValue(shutdown) { try await service.run() }
                        } catch {
                            failure = error
                        }
                        if !shutdown.isTriggered {
                            if let failure {
                                logger.error(
                                    "service failed; stopping the others",
                                    ["service": entry.name, "error": "\(failure)"])
                            } else {
                                logger.notice("service ended; stopping the others", ["service": entry.name])
                            }
                        }
                        started.end(index, failure)
                        finished.trigger()
                    }
                case .later(let make):
                    do {
                        if let made = try await made(by: make, unless: finished) {
                            queue = made[...] + queue
                        } else {
                            logger.notice("stopped while starting", ["service": entry.name])
                            stopping = true
                        }
                    } catch {
                        logger.error(
                            "service failed to start; stopping the others",
                            [
                                "service": entry.name, "error": "\(error)",
                            ])
                        started.end(started.start().index, error)
                        stopping = true
                    }
                }
            }
            // Wait for a shutdown, or for a service ending by itself; then stop the rest last-first.
            if !stopping { await firstOf([shutdownRequested, finished]) }
            for index in (0..<started.count).reversed() {
                started.shutdown(index).trigger()
                while !started.hasEnded(index) {
                    guard try await group.next() != nil else { break }
                }
            }
            try await group.waitForAll()
        }
        if let failure = started.firstFailure { throw failure }
    }

    /// What `make` makes, or nil when the group is told to stop first (or a started service ends on its own).
    private func made(by make: @escaping @Sendable () async throws -> [Entry], unless finished: GracefulShutdown)
        async throws -> [Entry]?
    {
        let stop = GracefulShutdown()
        return try await withThrowingTaskGroup(of: [Entry]?.self) { race in
            race.addTask { try await GracefulShutdown.$current.withValue(stop) { try await make() } }
            race.addTask { [shutdownRequested] in
                await firstOf([shutdownRequested, finished])
                if !Task.isCancelled { stop.trigger() }
                return nil
            }
            let first = try await race.next() ?? nil
            race.cancelAll()
            // `make` may return in the same instant the stop comes, before the watcher does: what it made is
            // dropped, never started after the stop.
            if shutdownRequested.isTriggered || finished.isTriggered { return nil }
            return first
        }
    }
}

/// Returns once any of `shutdowns` is triggered (or the task is cancelled).
private func firstOf(_ shutdowns: [GracefulShutdown]) async {
    await withTaskGroup(of: Void.self) { any in
        for shutdown in shutdowns { any.addTask { await shutdown.wait() } }
        await any.next()
        any.cancelAll()
    }
}

/// A chore repeated every `interval` (the ledger's health check, its pruning, a gauge's refresh) as a service:
/// the first round after `initialDelay`, and none once a graceful shutdown began.
public struct PeriodicService: Service {
    let initialDelay: Duration
    let interval: Duration
    let round: @Sendable () async -> Void

    public init(
        every interval: Duration, after initialDelay: Duration = .zero, _ round: @escaping @Sendable () async -> Void
    ) {
        self.initialDelay = initialDelay
        self.interval = interval
        self.round = round
    }

    public func run() async {
        let shutdown = GracefulShutdown.current
        var delay = initialDelay
        while !Task.isCancelled {
            // A sleep that the shutdown ends: an hourly chore must not hold the process for an hour.
            if delay > .zero { await shutdown.sleep(for: delay) }
            if Task.isCancelled || shutdown.isTriggered { return }
            await round()
            delay = interval
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

/// Calls `notify` when the group's shutdown begins. Started last, it is stopped first: before any port closes,
/// readiness can say "stopping", so a load balancer stops sending while the ports still answer.
public struct ShutdownNotice: Service {
    let notify: @Sendable () -> Void

    public init(_ notify: @escaping @Sendable () -> Void) { self.notify = notify }

    public func run() async {
        await GracefulShutdown.current.wait()
        notify()
    }
}
