public import Observability
import Synchronization

/// A long-running part of a process: the consumer runtime, an HTTP endpoint, a periodic chore. Every one has the
/// same shape (swift-service-lifecycle's `Service`): `run()` returns when its work is done, when the graceful
/// shutdown of its group reaches it (``GracefulShutdown/current``: finish what was taken, then return), or at
/// once when its task is cancelled. Throwing stops the whole group.
public protocol Service: Sendable {
    func run() async throws
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

extension PeriodicService {
    /// Each round in a recorded root span named `name`, current while the round runs (its calls to Apple and the
    /// ledger add theirs under it), when there is a tracer. A chore runs a few rounds a minute: every one is kept.
    public func traced(_ name: String, by tracer: Tracer?) -> PeriodicService {
        guard let tracer else { return self }
        let round = self.round
        return PeriodicService(every: interval, after: initialDelay) {
            await tracer.startRecorded(name, attributes: [("receipt_worker.chore", .string(name))]).run {
                await round()
            }
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
