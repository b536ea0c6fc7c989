public import Foundation
import Synchronization

/// A request as a handler sees it. Header names are lower-cased.
public struct ServerRequest: Sendable {
    public let method: String
    public let path: String
    public let query: [String: String]
    public let headers: [String: String]
    public let body: Data

    package init(method: String, path: String, query: [String: String], headers: [String: String], body: Data) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }
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

/// Errors setting up a socket.
public struct ServerError: Error, CustomStringConvertible {
    public let description: String
    package init(_ what: String) { description = "\(what): \(String(cString: strerror(errno)))" }
    package init(reason: String) { description = reason }
}
