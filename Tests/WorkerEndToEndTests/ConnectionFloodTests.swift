import Flows
import Foundation
import HTTPClient
import HTTPServerKit
import ReceiptWorker
import TestSupport
import Testing

/// Thousands of idle connections held to the worker's ports: the probe paths keep answering, and
/// one client cannot hold all of the receiver's connections.
@Suite("Connection floods on the worker's ports", .serialized, .timeLimit(.minutes(2)))
struct ConnectionFloodTests {
    /// A TCP connection from `source` (any 127.0.0.0/8 address is this host) to 127.0.0.1:`port`, held open
    /// and silent; nil when the server refused it.
    final class IdleConnection: Sendable {
        let fd: Int32

        init?(from source: String, to port: UInt16) {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return nil }
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            var remote = sockaddr_in()
            remote.sin_family = sa_family_t(AF_INET)
            remote.sin_port = port.bigEndian
            remote.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            let connected =
                bound
                && withUnsafePointer(to: &remote) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                    }
                }
            guard connected else {
                close(fd)
                return nil
            }
        }

        /// Whether the server closed it (a read returns end of stream at once).
        var isClosedByServer: Bool {
            var probe = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&probe, 1, 0) == 1 else { return false }
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, Int32(MSG_PEEK)) == 0
        }

        deinit { close(fd) }
    }

    /// `count` idle connections spread over `sources` addresses (127.0.0.2, 127.0.0.3, ...).
    static func flood(_ port: UInt16, count: Int, sources: Int) async throws -> [IdleConnection] {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                let connections = (0..<count).compactMap { index in
                    IdleConnection(from: "127.0.0.\(2 + index % sources)", to: port)
                }
                continuation.resume(returning: connections)
            }.start()
        }
    }

    /// Connections waiting in the kernel's accept queue of the socket listening on 127.0.0.1:`port`, not yet
    /// taken by the server (Linux: a listening socket's receive queue in /proc/net/tcp); nil when none listens.
    static func acceptQueue(_ port: UInt16) -> Int? {
        // A line `sl: local remote st tx_queue:rx_queue ...`; a listening socket's remote is zero, its state 0A.
        // Searched, not split: the table has a line per socket, thousands here.
        guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8),
            let listening = table.range(of: String(format: ": 0100007F:%04X 00000000:0000 0A ", port))
        else { return nil }
        let queues = table[listening.upperBound...].prefix(17)  // TTTTTTTT:RRRRRRRR
        return queues.split(separator: ":").last.flatMap { Int($0, radix: 16) }
    }

    @Test(
        "3,000 idle connections from 60 addresses held to the metrics port: /healthz and /readyz still answer at once")
    func metricsPort() async throws {
        let budget = DescriptorBudget.raiseToHardLimit()
        #expect(budget >= 8_000, "this test needs 6,000 descriptors (both ends are in this process)")
        #expect(MetricsEndpoint.limits(budget: budget).maximumConnections > 3_000)
        // However large the budget, what trickling connections could hold stays bounded.
        let huge = MetricsEndpoint.limits(budget: 1_048_576)
        #expect(huge.maximumConnections * huge.worstBytesPerConnection <= 64 * 1024 * 1024)
        let harness = try await WorkerHarness()
        // The port's limits, but an idle timeout no slow machine reaches while the flood is made and probed: what is
        // asserted is that held connections are not shed, not how long silence is allowed (its own test's).
        var limits = MetricsEndpoint.limits(budget: budget)
        limits.idleTimeoutSeconds = 300
        let worker = harness.worker
        let endpoint = try MetricsEndpoint(
            listen: ListenAddress(host: "127.0.0.1", port: 0), registry: worker.metrics.registry, limits: limits,
            readiness: { worker.readiness }, liveness: { worker.liveness })
        endpoint.start()
        let idle = try await Self.flood(endpoint.port, count: 3_000, sources: 60)
        #expect(idle.count == 3_000)
        // Held, that is accepted by the server, not waiting in the kernel's accept queue ahead of the probe.
        #expect(
            await eventually(timeout: .seconds(60)) { Self.acceptQueue(endpoint.port) == 0 },
            "the server did not take every connection: \(Self.acceptQueue(endpoint.port) ?? -1) wait")
        for path in ["/healthz", "/readyz"] {
            let started = ContinuousClock.now
            let response = try await harness.http.execute(
                HTTPRequest(url: "http://127.0.0.1:\(endpoint.port)\(path)", timeout: .seconds(5)))
            #expect(response.status == 200 || path == "/readyz" && response.status == 503, "\(path)")
            // Within the probes' timeoutSeconds (deploy/kubernetes/deployment.yaml): 3 s.
            #expect(ContinuousClock.now - started < .seconds(3), "\(path)")
        }
        #expect(idle.filter(\.isClosedByServer).isEmpty, "held, not shed")
        endpoint.stop()
        await harness.stop()
    }

    @Test("one client holding thousands of the receiver's connections gets at most a quarter; Apple still gets in")
    func receiverPerClient() async throws {
        let budget = DescriptorBudget.raiseToHardLimit()
        let limits = NotificationReceiver.limits(budget: budget)
        #expect(limits.maximumConnectionsPerIP < limits.maximumConnections)
        // Whatever the descriptors, no more connections than 64 MiB hold with each at its worst.
        let container = NotificationReceiver.limits(budget: 1_048_576)
        #expect(container.maximumConnections * container.worstBytesPerConnection <= 64 * 1_024 * 1_024)
        #expect(container.maximumConnections >= 200 && container.maximumConnectionsPerIP >= 64)
        let harness = try await WorkerHarness(notifications: true)
        let receiver = try #require(harness.receiver)
        let attempted = min(3_000, limits.maximumConnectionsPerIP + 500)
        let idle = try await Self.flood(receiver.port, count: attempted, sources: 1)
        // Past its share, the server closes the client's connections on accept: once it has taken them all, those
        // beyond its share are closed (the idle timeout, which would close the rest, is 10 s).
        #expect(
            await eventually(timeout: .seconds(60)) { Self.acceptQueue(receiver.port) == 0 },
            "the server did not take every connection: \(Self.acceptQueue(receiver.port) ?? -1) wait")
        var held = attempted
        _ = await eventually(timeout: .seconds(2)) {
            held = idle.filter { !$0.isClosedByServer }.count
            return held <= limits.maximumConnectionsPerIP
        }
        #expect(held <= limits.maximumConnectionsPerIP, "\(held) held of \(attempted)")
        let response = try await harness.http.execute(
            HTTPRequest(
                method: .post, url: "http://127.0.0.1:\(receiver.port)/notifications/apple",
                body: Data(#"{"signedPayload":"a.b.c"}"#.utf8), timeout: .seconds(5)))
        #expect(response.status == 400, "a request from another client is answered")
        await harness.stop()
    }
}
