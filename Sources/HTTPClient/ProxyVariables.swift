import Foundation

/// The proxy environment variables libcurl honours, read once when a client starts and handed to each request.
///
/// Left to itself, libcurl looks them up for every transfer (7.88: `no_proxy`, `NO_PROXY`, then `http_proxy`, or
/// `https_proxy` and `HTTPS_PROXY`, then `all_proxy`, `ALL_PROXY`: five or six lookups, each a walk of the whole
/// environment, which in a pod lists every service of its namespace). Resolved here by libcurl's rules (an empty
/// variable is unset; `HTTP_PROXY` in capitals is never read, as libcurl refuses it for CGI's sake), then set
/// explicitly, so libcurl asks the environment nothing.
struct ProxyVariables: Sendable, Equatable {
    /// Hosts reached directly (`no_proxy`); "" none.
    var noProxy: String
    /// The proxy for http:// URLs; "" none.
    var http: String
    /// The proxy for https:// URLs; "" none.
    var https: String

    /// The process's variables, each read by name as libcurl reads it (`getenv`).
    static func ofProcess() -> ProxyVariables {
        ProxyVariables { name in getenv(name).map { String(cString: $0) } }
    }

    /// `variable`: a variable's value by name, nil when unset.
    init(variable: (String) -> String?) {
        func value(_ name: String) -> String? {
            guard let value = variable(name), !value.isEmpty else { return nil }
            return value
        }
        let all = value("all_proxy") ?? value("ALL_PROXY")
        noProxy = value("no_proxy") ?? value("NO_PROXY") ?? ""
        http = value("http_proxy") ?? all ?? ""
        https = value("https_proxy") ?? value("HTTPS_PROXY") ?? all ?? ""
    }

    /// The proxy for `url` ("" none): its scheme, as libcurl reads it, chooses (no scheme is http).
    func proxy(for url: String) -> String {
        url.utf8.count >= 6 && url.utf8.prefix(6).lazy.map { $0 | 0x20 }.elementsEqual("https:".utf8) ? https : http
    }
}
