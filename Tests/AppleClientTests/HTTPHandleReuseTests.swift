import Foundation
import HTTPClient
import HTTPServerKit
import Observability
import Synchronization
import Testing

/// The client keeps each libcurl handle for the next request (reset, with its buffers): what one request set (its
/// method, body, headers) must not reach the next, and a POST without a body sends an empty one, never one libcurl
/// would read from the process's standard input.
@Suite("HTTP client: reused handles")
struct HTTPHandleReuseTests {
    private struct Seen: Equatable {
        var method: String
        var body: String
        var marker: String?
        var length: String? = nil
    }

    @Test("each request on a reused handle goes out as asked, with nothing of the request before it")
    func nothingCarriedOver() async throws {
        let seen = Mutex<[Seen]>([])
        let server = try MicroHTTPServer(host: "127.0.0.1", port: 0) { request in
            seen.withLock {
                $0.append(
                    Seen(
                        method: request.method, body: String(decoding: request.body, as: UTF8.self),
                        marker: request.headers["x-marker"], length: request.headers["content-length"]))
            }
            return .text(200, "")
        }
        server.start()
        defer { server.stop() }
        let http = HTTPClient(logger: Logger(label: "reuse-test", minimumLevel: .error))
        defer { http.shutdown() }
        let url = "http://127.0.0.1:\(server.port)/echo"
        // One at a time: each finds the handle the one before it left.
        let requests = [
            HTTPRequest(method: .post, url: url, headers: [("X-Marker", "first")], body: Data("first body".utf8)),
            HTTPRequest(method: .get, url: url),
            HTTPRequest(method: .delete, url: url),
            HTTPRequest(method: .put, url: url, body: Data("put body".utf8)),
            HTTPRequest(method: .post, url: url),
            HTTPRequest(method: .post, url: url, body: Data()),
            HTTPRequest(method: .post, url: url, headers: [("X-Marker", "last")], body: Data("last body".utf8)),
        ]
        for request in requests {
            #expect(try await http.execute(request).status == 200)
        }
        #expect(
            seen.withLock { $0 } == [
                Seen(method: "POST", body: "first body", marker: "first", length: "10"),
                Seen(method: "GET", body: "", marker: nil),
                Seen(method: "DELETE", body: "", marker: nil),
                Seen(method: "PUT", body: "put body", marker: nil, length: "8"),
                Seen(method: "POST", body: "", marker: nil, length: "0"),
                Seen(method: "POST", body: "", marker: nil, length: "0"),
                Seen(method: "POST", body: "last body", marker: "last", length: "9"),
            ])
    }
}
