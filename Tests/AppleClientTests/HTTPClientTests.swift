import Foundation
@testable import HTTPClient
import Synchronization
import TestSupport
import Testing
import AppStoreSimulator
import HTTPServerKit

/// The HTTP client's event loop (libcurl multi_socket on epoll) against the simulator over real sockets.
@Suite("HTTP client")
struct HTTPClientTests {
    @Test("a thousand requests in flight at once, each answered")
    func manyInFlight() async throws {
        let harness = try SimulatorHarness()
        // Long enough that all are in flight together even while other tests load the machine.
        try await harness.faults(["latency_ms": 8_000])
        let peak = Atomic<Int>(0)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<1_000 {
                group.addTask {
                    try await harness.http.execute(
                        HTTPRequest(
                            method: .post, url: "\(harness.base)/production/verifyReceipt", body: Data("{}".utf8),
                            timeout: .seconds(60))
                    ).status
                }
            }
            // While Apple "thinks", every request is in flight at once, none waiting for another.
            _ = await eventually(timeout: .seconds(7)) {
                peak.store(max(peak.load(ordering: .relaxed), harness.http.inFlight), ordering: .relaxed)
                return peak.load(ordering: .relaxed) == 1_000
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(peak.load(ordering: .relaxed) == 1_000)
        #expect(statuses.count == 1_000 && statuses.allSatisfy { $0 == 200 })
        #expect(harness.http.inFlight == 0)
    }

    @Test("a request slower than its timeout fails as a timeout, without waiting for the answer")
    func timeout() async throws {
        let harness = try SimulatorHarness()
        try await harness.faults(["latency_ms": 20_000])
        let started = ContinuousClock.now
        let error = await #expect(throws: HTTPClientError.self) {
            try await harness.http.execute(
                HTTPRequest(
                    method: .post, url: "\(harness.base)/production/verifyReceipt", body: Data("{}".utf8),
                    timeout: .milliseconds(200)))
        }
        #expect(error?.kind == .timeout)
        #expect(ContinuousClock.now - started < .seconds(10))  // the answer would have taken 20 s
    }

    @Test("cancelling the calling task aborts the transfer")
    func cancellation() async throws {
        let harness = try SimulatorHarness()
        try await harness.faults(["latency_ms": 20_000])
        let task = Task {
            try await harness.http.execute(
                HTTPRequest(method: .post, url: "\(harness.base)/production/verifyReceipt", body: Data("{}".utf8)))
        }
        // In flight: the loop took the transfer (Apple "thinks" for 20 s).
        #expect(await eventually { harness.http.inFlight == 1 })
        let started = ContinuousClock.now
        task.cancel()
        let result = await task.result
        #expect(ContinuousClock.now - started < .seconds(10))  // the answer would have taken 20 s
        guard case .failure(let error as HTTPClientError) = result else {
            Issue.record("expected a failure, got \(result)"); return
        }
        #expect(error.kind == .cancelled)
        #expect(await eventually { harness.http.inFlight == 0 })
    }

    @Test("a request from a task cancelled before it asks is not sent: it fails at once, cancelled")
    func cancelledBeforeSent() async throws {
        let harness = try SimulatorHarness()
        let before = try await harness.admin.appleRequests()
        let results = await withTaskGroup(of: Result<HTTPResponse, any Error>.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    withUnsafeCurrentTask { $0?.cancel() }
                    do {
                        return .success(
                            try await harness.http.execute(
                                HTTPRequest(
                                    method: .post, url: "\(harness.base)/production/verifyReceipt",
                                    body: Data("{}".utf8))))
                    } catch {
                        return .failure(error)
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(
            results.allSatisfy {
                guard case .failure(let error as HTTPClientError) = $0 else { return false }
                return error.kind == .cancelled
            })
        #expect(try await harness.admin.appleRequests() == before, "a cancelled caller's request reached Apple")
        #expect(harness.http.inFlight == 0)
    }

    @Test("a kept connection the server closes while idle is let go: the loop sleeps again, the next request works")
    func idleConnectionClosedByServer() async throws {
        let first = try SimulatorHarness()
        let http = first.http
        let answered = try await http.execute(
            HTTPRequest(method: .post, url: "\(first.base)/production/verifyReceipt", body: Data("{}".utf8)))
        #expect(answered.status == 200)
        let idle = http.loopTurns
        first.simulator.stop()  // closes the connection the client keeps for its next request
        // The close wakes the loop: the kept socket reports it.
        #expect(await eventually { http.loopTurns > idle })
        let before = http.loopTurns
        // Asleep in epoll: a turn a second at most when idle; a closed socket still registered would report
        // itself on every turn, thousands of them. Spinning is a rate: only a span of time shows it (the scenario).
        try await Task.sleep(for: .milliseconds(200))
        #expect(http.loopTurns - before < 50, "the event loop spun on the closed connection")
        let second = try SimulatorHarness()
        let again = try await http.execute(
            HTTPRequest(method: .post, url: "\(second.base)/production/verifyReceipt", body: Data("{}".utf8)))
        #expect(again.status == 200)
    }

    @Test("a dropped connection and a refused one are connection errors, retriable")
    func connectionErrors() async throws {
        let harness = try SimulatorHarness()
        try await harness.faults(["drop_rate": 1.0])
        let dropped = await #expect(throws: HTTPClientError.self) {
            try await harness.http.execute(
                HTTPRequest(method: .post, url: "\(harness.base)/production/verifyReceipt", body: Data("{}".utf8)))
        }
        #expect(dropped?.isRetriable == true)
        let refused = await #expect(throws: HTTPClientError.self) {
            try await harness.http.execute(HTTPRequest(url: "http://127.0.0.1:1/nothing", timeout: .seconds(2)))
        }
        #expect(refused?.isRetriable == true)
    }
    @Test("a request waiting for its host's only connection fails as a timeout once its own time is up")
    func timeoutWhileWaiting() async throws {
        let harness = try SimulatorHarness()
        // The first answer comes 4 s after the second's time is up: room for a starved machine's scheduling.
        try await harness.faults(["latency_ms": 4_300])
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 1
        let http = HTTPClient(configuration: configuration, logger: SimulatorHarness.logger)
        defer { http.shutdown() }
        let url = "\(harness.base)/production/verifyReceipt"
        async let first = http.execute(
            HTTPRequest(method: .post, url: url, body: Data("{}".utf8), timeout: .seconds(20)))
        #expect(await eventually { http.inFlight == 1 })
        let waited = await #expect(throws: HTTPClientError.self) {
            try await http.execute(
                HTTPRequest(method: .post, url: url, body: Data("{}".utf8), timeout: .milliseconds(300)))
        }
        #expect(waited?.kind == .timeout)
        #expect(http.inFlight == 1, "failed at its own time, while the first was still answered")
        #expect(try await first.status == 200)
    }

    @Test("however many requests wait, a host gets at most max_connections_per_host connections, and each is used")
    func connectionsPerHost() async throws {
        let harness = try SimulatorHarness()
        try await harness.faults(["latency_ms": 1_500])
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 200  // dealt over three multi handles: 67, 67 and 66
        let http = HTTPClient(configuration: configuration, logger: SimulatorHarness.logger)
        defer { http.shutdown() }
        let port = try #require(harness.base.split(separator: ":").last.flatMap { Int($0) })
        // The harness's own client (which set the latency) closes its connection: every one left is the test's.
        harness.http.shutdown()
        let peak = Atomic<Int>(0)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<500 {
                group.addTask {
                    try await http.execute(
                        HTTPRequest(
                            method: .post, url: "\(harness.base)/production/verifyReceipt", body: Data("{}".utf8),
                            timeout: .seconds(60))
                    ).status
                }
            }
            // Sampled until the allowed connections are all open, and half a second on (or 10 s in all).
            var deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                let open = Self.connections(to: port)
                if open >= 200, peak.load(ordering: .relaxed) < 200 {
                    deadline = min(deadline, .now + .milliseconds(500))
                }
                peak.store(max(peak.load(ordering: .relaxed), open), ordering: .relaxed)
                try await Task.sleep(for: .milliseconds(20))
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 500 && statuses.allSatisfy { $0 == 200 })
        // Every connection allowed used, and not more; libcurl 7.88 itself goes one over now and then on a loaded
        // machine, on each multi handle (measured: 61 with a limit of 60 and one handle; 202 here, with three, in
        // a CI run). A limit not held at all would show the 500 requests' connections.
        #expect((200...203).contains(peak.load(ordering: .relaxed)), "the limit not held, or not all of it used")
    }

    /// Established TCP connections of this machine to `port` on the loopback (the client's ends), all open at one
    /// moment: the sockets seen established in two reads of the table one after the other. One read is not a
    /// snapshot (the kernel hands it out a page at a time), so a socket closed during it and its replacement
    /// opened later can both be in it; a socket in both reads was open from the first's look at it to the
    /// second's, and every such span contains the moment between the two reads.
    static func connections(to port: Int) -> Int {
        established(to: port).intersection(established(to: port)).count
    }

    /// The inodes of the sockets one read of /proc/net/tcp shows established to `port`.
    static func established(to port: Int) -> Set<Substring> {
        // Read to its end: a /proc file's size says 0, which a read sized by it takes at its word.
        let table = String(
            decoding: FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile() ?? Data(), as: UTF8.self)
        let remote = ":" + String(port, radix: 16, uppercase: true).leftPadded(to: 4)
        var sockets = Set<Substring>()
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            if fields.count > 9, fields[2].hasSuffix(remote), fields[3] == "01" { sockets.insert(fields[9]) }
        }
        return sockets
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
