import Flows
import Foundation
public import HTTPServerKit
public import Lifecycle
public import Observability
import Runtime
import Synchronization

/// The services of each long-running command, in the order they start (they stop the other way round). The
/// one place where a process's parts are put together; `run` and `receive` only run the group.
public enum ProcessRoles {
    /// `receipt-worker run`, one group: the metrics port first (opening the ledger may wait for PostgreSQL or run a
    /// long migration, and meanwhile /healthz says the process lives, so a startup probe does not kill a
    /// migration, and /readyz why it is not ready), then the worker's parts once it is made and started
    /// (``Worker/startUp()``), then, on `notifications.listen`, the receiver: it listens once the topics are known
    /// to exist (a broker still down at start-up means connection refused for Apple, which sends again). On SIGTERM
    /// the receiver stops first, then the worker drains and commits, then the metrics port closes.
    public static func worker(
        _ configuration: WorkerConfiguration, logger: Logger, descriptors: Int = DescriptorBudget.current
    ) throws -> ServiceGroup {
        let metrics = WorkerMetrics.ofProcess()
        let made = Mutex<Worker?>(nil)
        var services: [ServiceGroup.Entry] = []
        if let listen = configuration.metricsListen {
            let opening = "opening the ledger (waiting for it, for its migration, or migrating it)"
            let endpoint = try MetricsEndpoint(
                listen: listen, registry: metrics.registry,
                readiness: { made.withLock { $0 }?.readiness ?? ["starting: \(opening)"] },
                liveness: { made.withLock { $0 }?.liveness ?? [] },
                starting: { made.withLock { $0 } == nil ? [opening] : [] })
            logger.info(
                "metrics endpoint listening",
                [
                    "listen": listen.description, "port": String(endpoint.port),
                    "max_connections": String(MetricsEndpoint.limits(budget: descriptors).maximumConnections),
                ])
            services.append(.init("metrics endpoint", endpoint))
        }
        // A stop while the ledger is not open yet (PostgreSQL not answering, a migration Job not done) ends the
        // wait: nothing was taken, nothing is to drain.
        services.append(
            .later("worker") {
                let worker = try await WorkerAssembly.make(configuration, logger: logger, metrics: metrics)
                made.withLock { $0 = worker }
                var parts = try await worker.startUp()
                if let listen = configuration.notificationsListen, !parts.isEmpty {
                    let receiver = try NotificationReceiver(listen: listen, worker: worker)
                    logger.info(
                        "notification receiver listening",
                        ["listen": listen.description, "port": String(receiver.port)])
                    parts.append(.init("notification receiver", receiver))
                }
                return parts
            })
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
