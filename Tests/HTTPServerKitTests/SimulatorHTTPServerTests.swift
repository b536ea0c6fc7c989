import Foundation
@testable import AppStoreSimulator
import HTTPServerKit
import TestSupport
import Testing

/// The epoll `HTTPServer` the App Store simulator stands on: in the serialized suite beside libmicrohttpd's, so
/// that their floods and held connections never run at once.
extension LoopbackServerTests {
    @Suite("HTTPServer (epoll)")
    struct HTTPServerTests {
        @Test("40,000 pipelined requests on one connection are all answered; another connection answers within 1 s")
        func pipelineFlood() async throws {
            let server = try HTTPServer(host: "127.0.0.1", port: 0, threads: 1) { _ in .text(200, "ok\n") }
            server.start()
            defer { server.stop() }
            let flood = try await PipelineFlood.run(port: server.port, count: 40_000, probePath: "/healthz")
            #expect(flood.answered == 40_000)
            #expect(flood.probesDuringFlood > 0, "the flood ended before a probe ran during it")
            #expect(flood.probeLatencies.allSatisfy { $0 < .seconds(1) }, "\(flood.probeLatencies)")
            print("HTTPServer: 40,000 pipelined requests in \(flood.elapsed)")
        }

        @Test("a pipeline of delayed replies is answered in order, each after its delay")
        func delayedPipeline() async throws {
            let server = try HTTPServer(host: "127.0.0.1", port: 0, threads: 1) { request in
                .text(200, request.path, after: .milliseconds(20))
            }
            server.start()
            defer { server.stop() }
            let port = server.port
            let (bodies, elapsed) = try await onThread {
                let client = try LoopbackClient(port: port)
                let started = ContinuousClock.now
                try client.send((0..<10).map { "GET /\($0) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" }.joined())
                let bodies = try (0..<10).map { _ in try client.readResponse()?.body }
                return (bodies, ContinuousClock.now - started)
            }
            #expect(bodies == (0..<10).map { "/\($0)" })
            #expect(elapsed >= .milliseconds(200))
        }

        @Test("a server stopped twice writes nothing into a descriptor that took the number of one it closed")
        func stopTwice() async throws {
            let server = try HTTPServer(host: "127.0.0.1", port: 0, threads: 1) { _ in .text(200, "ok\n") }
            server.start()
            server.stop()
            let port = server.port
            // The loop has ended, and closed its descriptors, once its port refuses connections.
            #expect(await eventually(timeout: .seconds(10)) { (try? LoopbackClient(port: port)) == nil })
            // New descriptors take the lowest free numbers, the ones the loop closed among them.
            var pairs: [[Int32]] = []
            for _ in 0..<16 {
                var pair: [Int32] = [0, 0]
                #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &pair) == 0)
                pairs.append(pair)
            }
            defer { for descriptor in pairs.joined() { close(descriptor) } }
            server.stop()  // the test's harness stops what a test stopped already
            var received = 0
            var byte: UInt8 = 0
            for descriptor in pairs.joined() where recv(descriptor, &byte, 1, Int32(MSG_DONTWAIT)) > 0 {
                received += 1
            }
            #expect(received == 0, "a stop after the loop ended wrote into another descriptor")
        }
    }
}
