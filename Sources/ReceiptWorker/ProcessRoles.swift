import Lifecycle
import Foundation
import HTTPServerKit
import Observability
import Runtime
import Synchronization

/// The services of each long-running command, in the order they start (they stop the other way round). The
/// one place where a process's parts are put together; `run` and `receive` only run the group.
public enum ProcessRoles {
    /// `receipt-worker run`: the metrics port first (opening the ledger may wait for PostgreSQL or run a long
    /// migration, and meanwhile /healthz says the process lives, so a startup probe does not kill a migration,
    /// and /readyz why it is not ready), then the worker and, on `notifications.listen`, the receiver. On
    /// SIGTERM the receiver stops first, then the worker drains and commits, then the metrics port closes.
    public static func worker(
        _ configuration: WorkerConfiguration, logger: Logger, descriptors: Int = DescriptorBudget.current
    ) throws -> ServiceGroup {
        let metrics = WorkerMetrics()
        let assembled = AssembledWorker(configuration: configuration, metrics: metrics, logger: logger)
        var services: [ServiceGroup.Entry] = []
        if let listen = configuration.metricsListen {
            let opening = "opening the ledger (waiting for it, for its migration, or migrating it)"
            let endpoint = try MetricsEndpoint(
                listen: listen, registry: metrics.registry,
                readiness: { assembled.worker?.readiness ?? ["starting: \(opening)"] },
                liveness: { assembled.worker?.liveness ?? [] },
                starting: { assembled.worker == nil ? [opening] : [] })
            logger.info(
                "metrics endpoint listening",
                [
                    "listen": listen.description, "port": String(endpoint.port),
                    "max_connections": String(MetricsEndpoint.limits(budget: descriptors).maximumConnections),
                ])
            services.append(.init("metrics endpoint", endpoint))
        }
        services.append(.init("worker", assembled))
        return ServiceGroup(services, logger: logger)
    }

    /// `receipt-worker receive`: the receiver's broker checks, its metrics port, then the receiver itself.
    public static func receiver(_ configuration: WorkerConfiguration, logger: Logger) throws -> ServiceGroup {
        guard let listen = configuration.notificationsListen else {
            throw ConfigurationError(
                .missingKey, key: "notifications.listen", reason: "is required by receive: where Apple posts")
        }
        let role = try ReceiverRole(configuration: configuration, logger: logger)
        var services: [ServiceGroup.Entry] = [.init("receiver role", role)]
        if let metricsListen = configuration.metricsListen {
            let endpoint = try MetricsEndpoint(listen: metricsListen, registry: role.metrics.registry) {
                role.readiness
            }
            services.append(.init("metrics endpoint", endpoint))
        }
        let receiver = try role.receiver(listen: listen)
        logger.info("notification receiver listening", ["listen": listen.description, "port": String(receiver.port)])
        services.append(.init("notification receiver", receiver))
        // Stopped first: /readyz says "stopping" while the receiver's port still answers.
        services.append(.init("readiness", ShutdownNotice { role.beginStopping() }))
        return ServiceGroup(services, logger: logger)
    }
}

/// The worker, put together once the metrics port serves (``WorkerAssembly/make(_:logger:metrics:)`` opens the
/// ledger), then run with the receiver beside it when `notifications.listen` is set.
final class AssembledWorker: Service {
    let configuration: WorkerConfiguration
    let metrics: WorkerMetrics
    let logger: Logger
    private let made = Mutex<Worker?>(nil)

    init(configuration: WorkerConfiguration, metrics: WorkerMetrics, logger: Logger) {
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
    }

    /// The worker, once made.
    var worker: Worker? { made.withLock { $0 } }

    func run() async throws {
        // A stop during start-up (the ledger not answering yet, a migration Job not done) ends the wait: nothing
        // was taken, nothing is to drain.
        let shutdown = GracefulShutdown.current
        let (configuration, logger, metrics) = (self.configuration, self.logger, self.metrics)
        let assembled: Worker? = try await withThrowingTaskGroup(of: Worker?.self) { group in
            group.addTask { try await WorkerAssembly.make(configuration, logger: logger, metrics: metrics) }
            group.addTask {
                await shutdown.wait()
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let worker = assembled else {
            logger.notice("stopped while starting (the ledger was not open yet)")
            return
        }
        made.withLock { $0 = worker }
        var services: [ServiceGroup.Entry] = [.init("worker", worker)]
        if let listen = configuration.notificationsListen {
            let receiver = try NotificationReceiver(listen: listen, worker: worker)
            logger.info(
                "notification receiver listening", ["listen": listen.description, "port": String(receiver.port)])
            services.append(.init("notification receiver", receiver))
        }
        let group = ServiceGroup(services, logger: logger)
        try await withGracefulShutdown(of: [GracefulShutdown.current], stop: { group.shutdown() }) {
            try await group.run()
        }
    }
}
