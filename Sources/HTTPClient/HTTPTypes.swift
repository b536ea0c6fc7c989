public import Foundation

/// One HTTP request.
public struct HTTPRequest: Sendable {
    public enum Method: String, Sendable { case get = "GET", post = "POST", put = "PUT", delete = "DELETE" }

    public var method: Method
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: Data?
    /// The whole exchange, connection included (and any wait for a connection to the host), at least 1 ms.
    /// Default: 10 s.
    public var timeout: Duration

    public init(
        method: Method = .get, url: String, headers: [(name: String, value: String)] = [], body: Data? = nil,
        timeout: Duration = .seconds(10)
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// One HTTP response. Header names are lower-cased.
public struct HTTPResponse: Sendable {
    public let status: Int
    public let headers: [(name: String, value: String)]
    public let body: Data
    /// "1.1" or "2".
    public let httpVersion: String

    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.last { $0.name == lowered }?.value
    }
}

/// A failure to get any HTTP response. `isRetriable` is true for timeouts and connection failures.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case timeout, connection, tls, cancelled, invalidRequest = "invalid_request", shutdown, tooLarge = "too_large",
            other
    }

    public let kind: Kind
    /// libcurl's text for people; never contains request headers or bodies.
    public let reason: String

    public var isRetriable: Bool { kind == .timeout || kind == .connection || kind == .other }
    public var description: String { "HTTP \(kind.rawValue): \(reason)" }

    public init(kind: Kind, reason: String) {
        self.kind = kind
        self.reason = reason
    }
}
