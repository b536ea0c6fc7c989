import Foundation
@testable import AppStoreSimulator
import Testing
import HTTPServerKit
import TestSupport

@Suite("HTTPRequestParser")
struct HTTPRequestParserTests {
    /// The first request of `text`, as the server loop parses a connection's input.
    func parse(_ text: String) -> HTTPRequestParser.Parse {
        var scanned = 0
        return HTTPRequestParser.parse(Array(text.utf8), from: 0, scanned: &scanned)
    }

    // Found writing the HTTPRequestParser fuzz target (it traps on this input without the fix): `?=` split into no parts, and
    // reading the key trapped, which took the simulator's server down (and, before MicroHTTPServer, the worker's
    // metrics endpoint).
    @Test("a query pair with an empty key or value is read, not a trap")
    func emptyQuerySides() {
        guard case .request(let request, _, _) = parse("GET /metrics?=&a=&=x&b HTTP/1.1\r\n\r\n") else {
            Issue.record("the request was not parsed")
            return
        }
        #expect(request.path == "/metrics")
        #expect(request.query == ["": "x", "a": "", "b": ""])
    }
}
