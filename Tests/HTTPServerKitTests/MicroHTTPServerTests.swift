import Foundation
import HTTPServerKit
import Synchronization
import TestSupport
import Testing

/// The HTTP servers on loopback (the product's and the simulator's), driven over real sockets. Serialized, both suites: the floods and the held
/// connections measure latency, which tests competing for two cores would blur.
@Suite(.serialized) enum LoopbackServerTests {}

/// `MicroHTTPServer`.
extension LoopbackServerTests {
    @Suite("MicroHTTPServer")
    struct MicroHTTPServerTests {
        /// A server whose handler awaits before answering, as the notification receiver awaits Kafka.
        static func echoServer(limits: HTTPServerLimits = HTTPServerLimits()) throws -> MicroHTTPServer {
            let server = try MicroHTTPServer(host: "127.0.0.1", port: 0, limits: limits) { request in
                switch request.path {
                case "/healthz", "/flood":
                    await Task.yield()
                    return .text(200, "ok\n")
                case "/drop":
                    return .drop(after: .zero)
                case "/late":
                    return .text(200, "late\n", after: .milliseconds(300))
                default:
                    try? await Task.sleep(for: .milliseconds(5))
                    let query = request.query.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                    let echoed = [
                        request.method, request.path, query.joined(separator: "&"), request.headers["x-trace"] ?? "-",
                        String(decoding: request.body, as: UTF8.self),
                    ]
                    return .respond(
                        status: request.method == "POST" ? 201 : 200, headers: [("X-Echo", "yes")],
                        body: Data(echoed.joined(separator: "|").utf8), after: .zero)
                }
            }
            server.start()
            return server
        }

        /// Sends `head`, then one byte every 0.3 s, each well inside an idle timeout, up to `bytes` of them: how many
        /// went through before the server closed the connection.
        static func trickle(_ head: String, bytes: Int, port: UInt16) async throws -> Int {
            try await onThread {
                let client = try LoopbackClient(port: port, timeout: .seconds(10))
                try client.send(head)
                var sent = 0
                for _ in 0..<bytes {
                    Thread.sleep(forTimeInterval: 0.3)
                    guard (try? client.send("a")) != nil else { break }
                    sent += 1
                }
                return sent
            }
        }

        @Test("GET and POST round trip on one keep-alive connection; the async handler's answer arrives")
        func roundTrip() async throws {
            let server = try Self.echoServer()
            defer { server.stop() }
            let port = server.port
            #expect(port != 0)
            let (get, post, late, lateElapsed) = try await onThread {
                let client = try LoopbackClient(port: port)
                try client.send("GET /items?b=2&a=x%20y HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trace: t-1\r\n\r\n")
                let get = try client.readResponse()
                try client.send(
                    "POST /items HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        + "Content-Length: 13\r\n\r\n{\"id\":\"n-1\"}\n")
                let post = try client.readResponse()
                let started = ContinuousClock.now
                try client.send("GET /late HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                let late = try client.readResponse()
                return (get, post, late, ContinuousClock.now - started)
            }
            #expect(get?.status == 200)
            #expect(get?.body == "GET|/items|a=x y&b=2|t-1|")
            #expect(get?.headers["x-echo"] == "yes")
            #expect(post?.status == 201)
            #expect(post?.body == "POST|/items||-|{\"id\":\"n-1\"}\n")
            #expect(late?.body == "late\n")
            #expect(lateElapsed >= .milliseconds(300))
        }

        @Test("a .drop reply closes the connection without an answer")
        func drop() async throws {
            let server = try Self.echoServer()
            defer { server.stop() }
            let port = server.port
            let response = try await onThread {
                let client = try LoopbackClient(port: port)
                try client.send("GET /drop HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                return try client.readResponse()
            }
            #expect(response == nil)
        }

        @Test("40,000 pipelined requests on one connection are all answered; another connection answers within 1 s")
        func pipelineFlood() async throws {
            let server = try Self.echoServer()
            defer { server.stop() }
            let flood = try await PipelineFlood.run(port: server.port, count: 40_000, probePath: "/healthz")
            #expect(flood.answered == 40_000)
            #expect(flood.probesDuringFlood > 0, "the flood ended before a probe ran during it")
            #expect(flood.probeLatencies.allSatisfy { $0 < .seconds(1) }, "\(flood.probeLatencies)")
            print("MicroHTTPServer: 40,000 pipelined requests in \(flood.elapsed)")
        }

        @Test("2,000 idle connections held open: a fresh request still answers within 1 s")
        func idleConnections() async throws {
            #expect(raiseOpenFileLimit(to: 8_192) >= 4_200, "needs 2,000 descriptors per side")
            var limits = HTTPServerLimits()
            limits.maximumConnections = 4_096
            limits.maximumConnectionsPerIP = 4_096  // every test connection comes from 127.0.0.1
            let server = try Self.echoServer(limits: limits)
            defer { server.stop() }
            let port = server.port
            let idle = try await onThread { try (0..<2_000).map { _ in try LoopbackClient(port: port) } }
            let fresh = try await onThread { try LoopbackClient.get("/healthz", port: port) }
            #expect(fresh.response?.status == 200)
            #expect(fresh.elapsed < .seconds(1), "\(fresh.elapsed)")
            // The idle ones were held, not shed: the last one opened still serves.
            let last = try await onThread {
                try idle[idle.count - 1].send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                return try idle[idle.count - 1].readResponse()
            }
            #expect(last?.status == 200)
        }

        @Test("a client that stalls halfway through the request line is disconnected after the idle timeout")
        func slowClient() async throws {
            var limits = HTTPServerLimits()
            limits.idleTimeoutSeconds = 1
            let server = try Self.echoServer(limits: limits)
            defer { server.stop() }
            let port = server.port
            let (received, elapsed) = try await onThread {
                let client = try LoopbackClient(port: port, timeout: .seconds(10))
                try client.send("GET /heal")
                let started = ContinuousClock.now
                let received = try client.receive()
                return (received, ContinuousClock.now - started)
            }
            #expect(received.isEmpty, "expected the server to close, got \(received.count) bytes")
            #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(4), "\(elapsed)")
            let fresh = try await onThread { try LoopbackClient.get("/healthz", port: port) }
            #expect(fresh.response?.status == 200)
        }

        @Test(
            "a client that trickles its headers, a byte inside each idle timeout, is disconnected once the idle timeout has passed since it connected; a kept connection that waits less is served"
        )
        func tricklingHeaders() async throws {
            var limits = HTTPServerLimits()
            limits.idleTimeoutSeconds = 2
            let server = try Self.echoServer(limits: limits)
            defer { server.stop() }
            let port = server.port
            // Thirty bytes over nine seconds: refused once closed.
            let sent = try await Self.trickle(
                "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", bytes: 30, port: port)
            #expect(sent < 20, "trickled headers were held for \(sent) bytes")
            // An honest keep-alive client: answered, silent for less than the idle timeout, answered again.
            let statuses = try await onThread {
                let client = try LoopbackClient(port: port, timeout: .seconds(10))
                var statuses: [Int?] = []
                for _ in 0..<3 {
                    try client.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    statuses.append(try client.readResponse()?.status)
                    Thread.sleep(forTimeInterval: 1.2)
                }
                return statuses
            }
            #expect(statuses == [200, 200, 200])
        }

        @Test("a client that trickles a body, a byte inside each idle timeout, is disconnected past the body's time")
        func tricklingBody() async throws {
            var limits = HTTPServerLimits()
            limits.idleTimeoutSeconds = 10
            limits.bodyTimeoutSeconds = 1
            let server = try Self.echoServer(limits: limits)
            defer { server.stop() }
            let port = server.port
            // Twenty bytes over six seconds: refused once closed.
            let sent = try await Self.trickle(
                "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n", bytes: 20, port: port)
            #expect(sent < 20, "the trickling body was held for all of its six seconds")
            let fresh = try await onThread { try LoopbackClient.get("/healthz", port: port) }
            #expect(fresh.response?.status == 200)
        }

        @Test("headers beyond the connection's memory get an error answer or a close, and the server goes on")
        func oversizedHeaders() async throws {
            let server = try Self.echoServer()
            defer { server.stop() }
            let port = server.port
            let answer = try await onThread {
                let client = try LoopbackClient(port: port)
                var head = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                for index in 0..<2_000 { head += "X-Filler-\(index): \(String(repeating: "f", count: 100))\r\n" }
                // The server may stop reading and close before all is written; the write failing is fine.
                do { try client.send(head + "\r\n") } catch {}
                do { return try client.readResponse()?.status } catch { return nil }
            }
            if let answer { #expect((400..<500).contains(answer), "\(answer)") }
            let fresh = try await onThread { try LoopbackClient.get("/healthz", port: port) }
            #expect(fresh.response?.status == 200)
        }

        @Test("a body over the limit is answered 413, declared or chunked")
        func oversizedBody() async throws {
            var limits = HTTPServerLimits()
            limits.maximumBodyBytes = 1_024
            let server = try Self.echoServer(limits: limits)
            defer { server.stop() }
            let port = server.port
            let body = String(repeating: "b", count: 4_096)
            let (declared, chunked, fitting) = try await onThread {
                let first = try LoopbackClient(port: port)
                try first.send("POST /items HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4096\r\n\r\n")
                let declared = try first.readResponse()
                let second = try LoopbackClient(port: port)
                let chunk = String(repeating: "c", count: 512)
                var request = "POST /items HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                for _ in 0..<8 { request += "200\r\n\(chunk)\r\n" }
                try second.send(request + "0\r\n\r\n")
                let chunked = try second.readResponse()
                let third = try LoopbackClient(port: port)
                try third.send("POST /items HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1024\r\n\r\n")
                try third.send(String(body.prefix(1_024)))
                let fitting = try third.readResponse()
                return (declared, chunked, fitting)
            }
            #expect(declared?.status == 413)
            #expect(chunked?.status == 413)
            #expect(fitting?.status == 201)
        }

        @Test("stop answers a request whose handler is still running with 503 and closes the port")
        func stopWhileHandling() async throws {
            let handling = Atomic<Bool>(false)
            let server = try MicroHTTPServer(host: "127.0.0.1", port: 0) { _ in
                handling.store(true, ordering: .relaxed)
                try? await Task.sleep(for: .seconds(30))
                return .text(200, "too late\n")
            }
            server.start()
            let port = server.port
            let pending = Task {
                try await onThread { try LoopbackClient.get("/slow", port: port).response?.status }
            }
            #expect(await eventually(timeout: .seconds(30)) { handling.load(ordering: .relaxed) }, "never handled")
            let started = ContinuousClock.now
            server.stop()
            #expect(ContinuousClock.now - started < .seconds(2))
            #expect(try await pending.value == 503)
            #expect(throws: LoopbackClient.Failure.self) { try LoopbackClient(port: port) }
        }

        @Test("a limit out of range fails at construction, naming the limit")
        func invalidLimits() {
            var limits = HTTPServerLimits()
            limits.idleTimeoutSeconds = 0
            #expect {
                _ = try MicroHTTPServer(host: "127.0.0.1", port: 0, limits: limits) { _ in .text(200, "") }
            } throws: { error in
                "\(error)".contains("idleTimeoutSeconds")
            }
        }
    }
}
