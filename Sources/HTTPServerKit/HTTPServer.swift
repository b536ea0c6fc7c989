import Foundation
import Synchronization

/// A request as a handler sees it. Header names are lower-cased.
public struct ServerRequest: Sendable {
    public let method: String
    public let path: String
    public let query: [String: String]
    public let headers: [String: String]
    public let body: Data
}

/// What the handler wants done with a request.
public enum ServerReply: Sendable {
    case respond(status: Int, headers: [(String, String)], body: Data, after: Duration)
    /// Close the connection without answering (a dropped connection).
    case drop(after: Duration)

    public static func json(
        _ status: Int, _ body: Data, headers: [(String, String)] = [], after delay: Duration = .zero
    ) -> ServerReply {
        .respond(status: status, headers: [("Content-Type", "application/json")] + headers, body: body, after: delay)
    }

    public static func text(
        _ status: Int, _ body: String, contentType: String = "text/plain; charset=utf-8", after delay: Duration = .zero
    ) -> ServerReply {
        .respond(status: status, headers: [("Content-Type", contentType)], body: Data(body.utf8), after: delay)
    }
}

/// A small HTTP/1.1 server on epoll: one event loop per thread, each with its own `SO_REUSEPORT` listening
/// socket, keep-alive, Content-Length bodies, and replies that can be delayed (simulated latency) without
/// holding a thread. Enough for the App Store simulator and the worker's metrics endpoint; not a general-purpose web server.
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
            let thread = Thread { loop.run() }
            thread.name = "http-server-\(index)"
            thread.start()
        }
    }

    public func stop() {
        for loop in loops { loop.stop() }
    }
}

/// Errors setting up a socket.
public struct ServerError: Error, CustomStringConvertible {
    public let description: String
    init(_ what: String) { description = "\(what): \(String(cString: strerror(errno)))" }
    init(reason: String) { description = reason }
}
