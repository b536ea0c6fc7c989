import Foundation
public import HTTPServerKit
import Observability

/// A small HTTP/1.1 server on epoll: one event loop per thread, each with its own `SO_REUSEPORT` listening
/// socket, keep-alive, Content-Length bodies, and replies that can be delayed (simulated latency) without
/// holding a thread. Enough for the App Store simulator at a benchmark's rate; not a general-purpose web server (the product's
/// ports are on libmicrohttpd, `HTTPServerKit`).
public final class HTTPServer: Sendable {
    public let port: UInt16
    private let loops: [ServerLoop]

    public init(host: String, port: UInt16, threads: Int, handler: @escaping @Sendable (ServerRequest) -> ServerReply)
        throws
    {
        var loops: [ServerLoop] = []
        var boundPort = port
        for _ in 0..<max(1, threads) {
            let loop = try ServerLoop(host: host, port: boundPort, handler: handler)
            boundPort = loop.port  // port 0: the first socket picks one, the others share it
            loops.append(loop)
        }
        self.port = boundPort
        self.loops = loops
    }

    public func start() {
        for (index, loop) in loops.enumerated() {
            NamedThread.start("sim-http-\(index)") { loop.run() }
        }
    }

    public func stop() {
        for loop in loops { loop.stop() }
    }
}
