import Foundation
@testable import HTTPClient
import Testing

/// Proxies from the environment, read once when a client starts, by libcurl's rules.
@Suite("HTTP client proxies")
struct HTTPProxyTests {
    @Test("an empty variable is unset, HTTP_PROXY in capitals is never read, and all_proxy serves what is not named")
    func rules() {
        let unset = ProxyVariables(["https_proxy": "", "no_proxy": ""])
        #expect(unset == ProxyVariables([:]))
        #expect(unset.noProxy.isEmpty)
        #expect(unset.proxy(for: "https://buy.itunes.apple.com/verifyReceipt").isEmpty)
        let variables = ProxyVariables([
            "HTTP_PROXY": "http://from-a-request-header:1", "https_proxy": "", "HTTPS_PROXY": "http://egress:3128",
            "all_proxy": "http://all:3128", "NO_PROXY": "internal.example",
        ])
        #expect(variables.proxy(for: "HTTPS://buy.itunes.apple.com/verifyReceipt") == "http://egress:3128")
        #expect(variables.proxy(for: "http://simulator:8080/verifyReceipt") == "http://all:3128")
        #expect(variables.proxy(for: "simulator:8080/verifyReceipt") == "http://all:3128")
        #expect(variables.noProxy == "internal.example")
        #expect(ProxyVariables(["no_proxy": "a", "NO_PROXY": "b"]).noProxy == "a")
        // all_proxy serves https too, as given (a SOCKS proxy with its credentials is libcurl's to read).
        let socks = ProxyVariables(["ALL_PROXY": "socks5h://user:secret@egress:1080"])
        #expect(socks.proxy(for: "https://api.storekit.itunes.apple.com/inApps/v1/history/1") == socks.http)
        #expect(socks.https == "socks5h://user:secret@egress:1080")
    }

    @Test("a request goes through the proxy the environment names, and straight to a host no_proxy lists")
    func throughTheProxy() async throws {
        let harness = try SimulatorHarness()
        // Nothing listens on port 1: only a proxy (the simulator stands in for one) gets an answer for it.
        let target = HTTPRequest(url: "http://127.0.0.1:1/production/verifyReceipt", timeout: .seconds(10))
        let proxied = HTTPClient(
            configuration: .init(), proxies: ProxyVariables(["http_proxy": harness.base]),
            logger: SimulatorHarness.logger)
        defer { proxied.shutdown() }
        let answer = try await proxied.execute(target)
        #expect((200...599).contains(answer.status))
        let direct = HTTPClient(
            configuration: .init(), proxies: ProxyVariables(["http_proxy": harness.base, "no_proxy": "127.0.0.1"]),
            logger: SimulatorHarness.logger)
        defer { direct.shutdown() }
        let refused = await #expect(throws: HTTPClientError.self) { try await direct.execute(target) }
        #expect(refused?.kind == .connection)
    }
}

extension ProxyVariables {
    init(_ environment: [String: String]) { self.init { environment[$0] } }
}
