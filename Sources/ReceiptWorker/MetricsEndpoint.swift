public import Lifecycle
import Foundation
public import HTTPServerKit
public import Observability
import Runtime
import Flows

/// Serves `metrics.listen`: `/metrics` (Prometheus text); `/startupz` (200 once the process has started: for
/// the worker, its ledger opened and its schema checked, which may wait for a migration Job); `/healthz` (200
/// unless the process is wedged and a restart would mend it: the liveness probe's); `/readyz` (partitions
/// assigned and the ledger reachable; 503 otherwise, so a load balancer or Kubernetes waits).
/// On `MicroHTTPServer` with its default limits (connections, idle time, header and body size), so a client that
/// pipelines without end, stalls or holds connections open is bounded instead of taking the process down.
public final class MetricsEndpoint: Service {
    private let server: MicroHTTPServer
    public var port: UInt16 { server.port }

    /// Binds `listen`. Throws a configuration error naming `metrics.listen` when the address cannot be bound.
    public convenience init(listen: ListenAddress, worker: Worker) throws {
        try self.init(
            listen: listen, registry: worker.metrics.registry, readiness: { worker.readiness },
            liveness: { worker.liveness })
    }

    /// The port's limits: a quarter of the process's descriptor budget in connections (probes must get in
    /// beside thousands of idle connections), 64 per client address, 10 s of silence. Every request is a GET:
    /// no body, 16 KiB for its headers, and no more connections than 64 MiB hold at that (4,096), so a flood of
    /// trickling connections cannot hold gigabytes where the budget is large.
    public static func limits(budget: Int = DescriptorBudget.current) -> HTTPServerLimits {
        var limits = HTTPServerLimits()
        limits.maximumBodyBytes = 0
        limits.connectionMemoryBytes = 16 * 1024
        limits.maximumConnections = DescriptorBudget.connections(share: 0.25, of: budget)
        limits.capConnections(atMemory: 64 * 1024 * 1024)
        return limits
    }

    /// `readiness`: why the process is not ready (empty when it is), asked on every `/readyz`; `liveness`: why
    /// it must be restarted (`/healthz`); `starting`: why it has not started yet (`/startupz`).
    public init(
        listen: ListenAddress, registry: MetricsRegistry, limits: HTTPServerLimits = MetricsEndpoint.limits(),
        readiness: @escaping @Sendable () -> [String], liveness: @escaping @Sendable () -> [String] = { [] },
        starting: @escaping @Sendable () -> [String] = { [] }
    ) throws {
        do {
            server = try MicroHTTPServer(host: listen.host, port: listen.port, limits: limits) { request in
                Self.route(request, registry: registry, readiness: readiness, liveness: liveness, starting: starting)
            }
        } catch {
            throw ConfigurationError(.unusable, key: "metrics.listen", reason: "cannot listen on \(listen): \(error)")
        }
    }

    public func start() { server.start() }
    public func stop() { server.stop() }

    /// Serves until its graceful shutdown (or cancellation), then stops answering.
    public func run() async {
        start()
        await GracefulShutdown.current.wait()
        stop()
    }

    static func route(
        _ request: ServerRequest, registry: MetricsRegistry, readiness: () -> [String],
        liveness: () -> [String] = { [] }, starting: () -> [String] = { [] }
    ) -> ServerReply {
        switch (request.method, request.path) {
        case ("GET", "/metrics"):
            return .text(200, registry.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        case ("GET", "/healthz"):
            let problems = liveness()
            return problems.isEmpty ? .text(200, "ok\n") : .text(503, "wedged: \(problems.joined(separator: "; "))\n")
        case ("GET", "/startupz"):
            let problems = starting()
            return problems.isEmpty
                ? .text(200, "started\n") : .text(503, "starting: \(problems.joined(separator: "; "))\n")
        case ("GET", "/readyz"):
            let problems = readiness()
            return problems.isEmpty
                ? .text(200, "ready\n") : .text(503, "not ready: \(problems.joined(separator: "; "))\n")
        default:
            return .text(404, "not found\n")
        }
    }
}
