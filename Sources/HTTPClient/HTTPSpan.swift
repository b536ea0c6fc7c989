import Foundation
public import Observability

extension HTTPRequest {
    /// What a span of this request says of it (OpenTelemetry's HTTP client conventions): its method, server and URL
    /// without its query (a query could carry what a span must not; none of Apple's do, but the rule is simpler than
    /// a list).
    public var spanAttributes: [(String, SpanValue)] {
        var attributes: [(String, SpanValue)] = [("http.request.method", .string(method.rawValue))]
        guard let parsed = URLComponents(string: url), let scheme = parsed.scheme, let host = parsed.host else {
            return attributes
        }
        let port = parsed.port ?? (scheme == "https" ? 443 : 80)
        attributes += [
            ("server.address", .string(host)), ("server.port", .int(Int64(port))),
            (
                "url.full",
                .string("\(scheme)://\(host)\(parsed.port.map { ":\($0)" } ?? "")\(parsed.percentEncodedPath)")
            ),
        ]
        return attributes
    }
}
