public import Observability
import Synchronization

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
func firstOf(_ shutdowns: [GracefulShutdown]) async {
    await withTaskGroup(of: Void.self) { any in
        for shutdown in shutdowns { any.addTask { await shutdown.wait() } }
        await any.next()
        any.cancelAll()
    }
}
