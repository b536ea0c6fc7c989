import Foundation
import HTTPServerKit

/// Serves `metrics.listen`: `/metrics` (Prometheus text), `/healthz` (the process answers), `/readyz`
/// (partitions assigned and the ledger reachable; 503 otherwise, so a load balancer or Kubernetes waits).
/// On `MicroHTTPServer` with its default limits (connections, idle time, header and body size), so a client that
/// pipelines without end, stalls or holds connections open is bounded instead of taking the process down.
public final class MetricsEndpoint: Sendable {
    private let server: MicroHTTPServer
    public var port: UInt16 { server.port }

    /// Binds `listen` (`host:port`, IPv4; an empty host means every interface). Throws a configuration
    /// error naming `metrics.listen` when the address cannot be bound.
    public init(listen: String, worker: Worker) throws {
        let colon = listen.lastIndex(of: ":")!  // validated by ConfigurationLoader
        let host = listen[..<colon].isEmpty ? "0.0.0.0" : String(listen[..<colon])
        let port = UInt16(listen[listen.index(after: colon)...])!
        do {
            server = try MicroHTTPServer(host: host == "localhost" ? "127.0.0.1" : host, port: port) { request in
                Self.route(request, worker: worker)
            }
        } catch {
            throw ConfigurationError(key: "metrics.listen", reason: "cannot listen on \(listen): \(error)")
        }
    }

    public func start() { server.start() }
    public func stop() { server.stop() }

    static func route(_ request: ServerRequest, worker: Worker) -> ServerReply {
        switch (request.method, request.path) {
        case ("GET", "/metrics"):
            return .text(200, worker.metrics.registry.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        case ("GET", "/healthz"):
            return .text(200, "ok\n")
        case ("GET", "/readyz"):
            let problems = worker.readiness
            return problems.isEmpty
                ? .text(200, "ready\n") : .text(503, "not ready: \(problems.joined(separator: "; "))\n")
        default:
            return .text(404, "not found\n")
        }
    }
}
