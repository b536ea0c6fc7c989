import Foundation
import Kafka
import Synchronization
import TestSupport
import TestProcess
import Testing

@Suite("Kafka failures", .timeLimit(.minutes(2)))
struct KafkaFailureTests {
    @Test("a send to a stopped broker fails with a retriable error within its delivery timeout")
    func sendToStoppedBroker() async throws {
        let broker = try PrivateBroker.start()
        defer { broker.stop() }
        try await KafkaAdmin.createTopics(
            bootstrapServers: broker.bootstrap, topics: [("t", 1)], logger: TestBroker.logger)
        var configuration = KafkaProducer.Configuration(bootstrapServers: broker.bootstrap)
        configuration.deliveryTimeout = .seconds(3)
        let producer = try KafkaProducer(configuration: configuration, logger: TestBroker.logger)
        _ = try await producer.send(OutboundMessage(topic: "t", value: Array("ok".utf8)))

        broker.stop()
        let started = ContinuousClock.now
        let error = await #expect(throws: KafkaError.self) {
            _ = try await producer.send(OutboundMessage(topic: "t", value: Array("lost?".utf8)))
        }
        let elapsed = ContinuousClock.now - started
        #expect(error?.isRetriable == true)
        #expect(error?.code == .messageTimedOut)
        // librdkafka scans for expired messages periodically and the idempotent producer adds its own
        // broker-down handling, so the error comes some seconds after the 3 s timeout (7-9 s seen here).
        // The bound shows the configured timeout governs: librdkafka's default (message.timeout.ms, 300 s)
        // would take minutes. Loose, for a loaded CI machine (16 s seen there).
        #expect(elapsed < .seconds(30), "took \(elapsed), delivery timeout 3 s")
        await producer.close(timeout: .seconds(1))
    }

    @Test("closing a producer fails what is still queued instead of leaving senders waiting")
    func closeFailsQueuedRecords() async throws {
        var configuration = KafkaProducer.Configuration(bootstrapServers: "127.0.0.1:1")  // nothing listens
        configuration.deliveryTimeout = .seconds(60)
        let producer = try KafkaProducer(configuration: configuration, logger: TestBroker.logger)
        let pending = Task { try await producer.send(OutboundMessage(topic: "t", value: [1])) }
        #expect(await eventually { producer.outstanding == 1 })
        await producer.close(timeout: .milliseconds(200))
        await #expect(throws: KafkaError.self) { try await pending.value }
        await #expect(throws: KafkaError.self) {
            _ = try await producer.send(OutboundMessage(topic: "t", value: [2]))
        }
    }

    @Test("records queued while the producer closes are each answered: failed to their callers, none left waiting")
    func recordsRacingClose() async throws {
        var configuration = KafkaProducer.Configuration(bootstrapServers: "127.0.0.1:1")  // nothing listens
        configuration.deliveryTimeout = .seconds(60)
        let producer = try KafkaProducer(configuration: configuration, logger: TestBroker.logger)
        let outcomes = QueueOutcomes()
        let giveUpAt = ContinuousClock.now + .seconds(60)  // a producer that never refuses: the test fails, not spins
        for _ in 0..<4 {
            Task {
                // Queues records until the producer refuses one: the last ones race close() setting its flag.
                while ContinuousClock.now < giveUpAt {
                    do {
                        try producer.enqueue(OutboundMessage(topic: "t", value: [1])) { _ in
                            outcomes.answered.add(1, ordering: .relaxed)
                        }
                        outcomes.queued.add(1, ordering: .relaxed)
                    } catch let error as KafkaError where error.code == .closed {
                        outcomes.refused.add(1, ordering: .relaxed)
                        return
                    } catch {}  // librdkafka's queue is full: try again
                    await Task.yield()
                }
            }
        }
        #expect(await eventually { outcomes.queued.load(ordering: .relaxed) >= 100 })
        await producer.close(timeout: .zero)
        #expect(await eventually { outcomes.refused.load(ordering: .relaxed) == 4 })
        let queued = outcomes.queued.load(ordering: .relaxed)
        #expect(
            await eventually(timeout: .seconds(10)) { outcomes.answered.load(ordering: .relaxed) == queued },
            "\(queued - outcomes.answered.load(ordering: .relaxed)) of \(queued) records queued as the producer closed were never answered"
        )
    }
}

/// What became of the records a test queued, counted across its tasks.
private final class QueueOutcomes: Sendable {
    let queued = Atomic<Int>(0)
    let answered = Atomic<Int>(0)
    let refused = Atomic<Int>(0)
}

/// A broker of the test's own, so it can be stopped without disturbing other tests.
///
/// Spawned with posix_spawn rather than Foundation's Process, whose waitUntilExit spins on Linux.
final class PrivateBroker: Sendable {
    let bootstrap: String
    private let pid: pid_t
    private let stopped = Atomic<Bool>(false)

    /// Up to three attempts, each on a fresh port: a port found free can be taken by another test before the
    /// broker binds it.
    static func start() throws -> PrivateBroker {
        var failure: any Error = KafkaTestError("private broker did not start")
        for _ in 0..<3 {
            do { return try startOnce() } catch { failure = error }
        }
        throw failure
    }

    private static func startOnce() throws -> PrivateBroker {
        let tansu = try #require(ProcessInfo.processInfo.environment["TANSU_BIN"], "TANSU_BIN is not set")
        let port = try freeLoopbackPort()
        let url = "tcp://127.0.0.1:\(port)"
        let arguments = [tansu, "broker", "--listener-url", url, "--advertised-listener-url", url, "--silent"]
        var pid: pid_t = 0
        var cArguments = arguments.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        // Standard streams only: the test process may hold thousands of sockets just then.
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        _ = test_process_spawn_close_from(&actions, 3)
        let status = posix_spawn(&pid, tansu, &actions, nil, &cArguments, environ)
        guard status == 0 else { throw KafkaTestError("posix_spawn tansu: \(status)") }
        let broker = PrivateBroker(bootstrap: "127.0.0.1:\(port)", pid: pid)
        try broker.waitUntilListening(port: port)
        return broker
    }

    private init(bootstrap: String, pid: pid_t) {
        self.bootstrap = bootstrap
        self.pid = pid
    }

    private func waitUntilListening(port: UInt16) throws {
        for _ in 0..<200 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            close(fd)
            if connected { return }
            usleep(50_000)
        }
        stop()
        throw KafkaTestError("private broker did not start")
    }

    /// Kills the broker and reaps it. Safe to call twice.
    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed), kill(pid, SIGKILL) == 0 else { return }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}

struct KafkaTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
