import Dispatch
import Foundation
import Observability
import Synchronization

/// An HTTP/1.1 server on libmicrohttpd, with bounded everything: connections (in all and per address), idle
/// time, header memory and body size (`HTTPServerLimits`). Pipelined and keep-alive requests are answered one
/// after another per connection, each by an async handler that runs off the server's thread, so a handler may
/// await (a Kafka acknowledgement, a database) without holding up other connections.
///
/// ```swift
/// let server = try MicroHTTPServer(host: "127.0.0.1", port: 0) { request in .text(200, "ok\n") }
/// server.start()
/// defer { server.stop() }
/// ```
public final class MicroHTTPServer: Sendable {
    private let daemon: MicroHTTPDaemon
    private let loop = Mutex(Loop.notStarted)

    private enum Loop {
        case notStarted
        case running(finished: DispatchSemaphore)
        case stopped
    }

    /// The bound port: the kernel's pick when `port` was 0.
    public var port: UInt16 { daemon.port }

    /// Binds `host:port` (IPv4; "" or "0.0.0.0" is every interface). Throws when a limit is out of range or the
    /// address cannot be bound. Nothing is served until `start()`.
    public init(
        host: String, port: UInt16, limits: HTTPServerLimits = HTTPServerLimits(),
        handler: @escaping @Sendable (ServerRequest) async -> ServerReply
    ) throws {
        daemon = try MicroHTTPDaemon(host: host, port: port, limits: try limits.validated(), handler: handler)
    }

    deinit { stop() }

    /// Starts serving, on a thread of its own (MHD's event loop blocks in `poll`). A second call does nothing.
    public func start() {
        loop.withLock { loop in
            guard case .notStarted = loop else { return }
            let finished = DispatchSemaphore(value: 0)
            NamedThread.start("httpd-\(daemon.port)") { [daemon] in
                daemon.run()
                finished.signal()
            }
            loop = .running(finished: finished)
        }
    }

    /// Stops: requests whose handler has not answered yet get 503, then the listening socket and every
    /// connection are closed. Returns once they are (within a few milliseconds). Idempotent.
    public func stop() {
        let previous = loop.withLock { loop in
            defer { loop = .stopped }
            return loop
        }
        switch previous {
        case .notStarted:
            daemon.shutDown()
        case .running(let finished):
            daemon.requestStop()
            finished.wait()
        case .stopped:
            break
        }
    }
}
