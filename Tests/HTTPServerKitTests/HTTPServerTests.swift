import Foundation
import HTTPServerKit
import Testing

/// The epoll `HTTPServer` the App Store simulator stands on.
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
    }
}
