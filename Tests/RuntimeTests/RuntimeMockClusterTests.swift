import Foundation
import Kafka
import KafkaMock
import Lifecycle
import Observability
@testable import Runtime
import Synchronization
import Testing
import Vocabulary

/// The consumer runtime's commits, drain, dead letters and revocations, on librdkafka's mock cluster in this
/// process: no broker to start, each case in about a second. The end-to-end suites keep what needs the wire.
@Suite("The consumer runtime on librdkafka's mock cluster: commits, drain, dead letters, revocation")
struct RuntimeMockClusterTests {
    static let logger = Logger(label: "runtime-test")

    /// Answers `ok-*` with a record on `out`, dead-letters `bad-*`, and holds `slow-*` until let go; holds `deaf-*`
    /// ten minutes looking at no let-go (as a job waits at a lane Apple paused), only its task's cancellation
    /// ending the wait early; throws a transient error at the first two handlings of `flaky-*` (then answers) and at
    /// every handling of `broken-*`; counts every handling of each value.
    final class Handler: MessageHandler {
        let out: String
        let deliveries = Mutex<[String: Int]>([:])
        let partitions = Mutex<[String: Int32]>([:])
        /// `deaf-*` waits that ended before their ten minutes.
        let endedEarly = Mutex<[String: Int]>([:])

        init(out: String) { self.out = out }

        func intake(of message: InboundMessage) -> Intake { Intake(group: "g") }
        func isPermanent(_ error: any Error) -> Bool { false }
        var deadLetterReason: DeadLetterReason { .malformedJob }

        func handle(_ message: InboundMessage, context: any HandlingContext) async throws -> Disposition {
            let value = String(decoding: message.value, as: UTF8.self)
            deliveries.withLock { $0[value, default: 0] += 1 }
            partitions.withLock { $0[value] = message.topicPartition.partition }
            if value.hasPrefix("bad") { return .deadLetter(DeadLetter(reason: .malformedJob, error: "bad input")) }
            if value.hasPrefix("slow") {
                while true { try await context.sleep(for: .milliseconds(20)) }  // throws LetGo once let go
            }
            if value.hasPrefix("deaf") {
                let began = ContinuousClock.now
                try? await Task.sleep(for: .seconds(600))
                if ContinuousClock.now - began < .seconds(600) { endedEarly.withLock { $0[value, default: 0] += 1 } }
                try Task.checkCancellation()
            }
            if value.hasPrefix("broken") || (value.hasPrefix("flaky") && count(value) <= 2) {
                throw Unavailable()
            }
            return .publish([OutboundRecord(topic: out, key: value, value: Array(value.utf8), headers: [])])
        }

        func count(_ value: String) -> Int { deliveries.withLock { $0[value] ?? 0 } }
        func ended(_ value: String) -> Int { endedEarly.withLock { $0[value] ?? 0 } }

        /// A service not answering yet, as a chain whose revocation status is being asked.
        struct Unavailable: Error {}
        func partition(_ value: String) -> Int32? { partitions.withLock { $0[value] } }
    }

    final class Messages: Sendable {
        private let messages = Mutex<[InboundMessage]>([])
        func append(_ message: InboundMessage) -> Int {
            messages.withLock {
                $0.append(message)
                return $0.count
            }
        }
        var all: [InboundMessage] { messages.withLock { $0 } }
    }

    /// A mock cluster with the topics `jobs` (two partitions), `out` and `dlq`.
    struct Cluster {
        let mock: KafkaMockCluster
        let jobs = "jobs", out = "out", dlq = "dlq", group = "runtime-test"

        init() throws {
            mock = try KafkaMockCluster()
            try mock.createTopic(jobs, partitions: 2)
            try mock.createTopic(out, partitions: 1)
            try mock.createTopic(dlq, partitions: 1)
        }

        var properties: [String: String] { ["session.timeout.ms": "6000", "heartbeat.interval.ms": "500"] }

        func produce(_ values: [String], headers: [MessageHeader] = []) async throws {
            let producer = try KafkaProducer(
                configuration: .init(bootstrapServers: mock.bootstrapServers), logger: RuntimeMockClusterTests.logger)
            for value in values {
                _ = try await producer.send(
                    OutboundMessage(topic: jobs, key: Array(value.utf8), value: Array(value.utf8), headers: headers))
            }
            await producer.close()
        }

        /// `beginsTraces` and `tracer`: the jobs topic's route as the notifications topic's is, traced.
        func runtime(
            _ handler: Handler, drain: Duration = .seconds(5), stallTimeout: Duration = .seconds(60),
            beginsTraces: Bool = false, tracer: Tracer? = nil,
            recordOffsets: (@Sendable ([TopicPartition: Int64]) async throws -> Void)? = nil
        ) throws -> ConsumerRuntime {
            var consumer = KafkaConsumer.Configuration(
                bootstrapServers: mock.bootstrapServers, groupID: group,
                properties: properties.merging(["auto.offset.reset": "earliest"]) { $1 })
            consumer.revocationTimeout = drain + .seconds(5)
            var configuration = RuntimeConfiguration(
                routes: [.init(topic: jobs, handler: handler, beginsTraces: beginsTraces)], deadLetterTopic: dlq)
            configuration.groups = ["g"]
            configuration.tracer = tracer
            configuration.retry.maxAttempts = 4
            configuration.retry.initialBackoff = .milliseconds(10)
            configuration.retry.maxBackoff = .milliseconds(50)
            configuration.drainTimeout = drain
            configuration.stallTimeout = stallTimeout
            return ConsumerRuntime(
                configuration: configuration,
                consumer: try KafkaConsumer(configuration: consumer, logger: RuntimeMockClusterTests.logger),
                producer: try KafkaProducer(
                    configuration: .init(bootstrapServers: mock.bootstrapServers),
                    logger: RuntimeMockClusterTests.logger),
                registry: MetricsRegistry(), logger: RuntimeMockClusterTests.logger, recordOffsets: recordOffsets)
        }

        /// The values and headers on `topic`, read from its start for up to `timeout` until there are `count`.
        func read(_ topic: String, count: Int, timeout: Duration = .seconds(20)) async throws -> [InboundMessage] {
            let reader = try KafkaConsumer(
                configuration: .init(
                    bootstrapServers: mock.bootstrapServers, groupID: "reader-\(UUID())", properties: properties),
                logger: RuntimeMockClusterTests.logger)
            try await reader.assign(topic: topic, from: .beginning)
            let messages = Messages()
            // A deadline passed is not an error here: what was read by then is the answer.
            try? await withDeadline(timeout, timeout: CancellationError()) {
                for await event in reader.events {
                    guard case .message(let message) = event else { continue }
                    if messages.append(message) >= count { break }
                }
            }
            reader.endEvents()
            await reader.close()
            return messages.all
        }

        /// The group's committed offset of each partition of `jobs` (0: none).
        /// The group's committed offsets as a new member of it reads them (after its runtimes stopped, say).
        func committedOffsets() async throws -> [Int64] { try await committed(using: try runtime(Handler(out: out))) }

        func committed(using runtime: ConsumerRuntime) async throws -> [Int64] {
            let partitions = (0..<2).map { TopicPartition(topic: jobs, partition: Int32($0)) }
            let offsets = try await runtime.consumer.committed(partitions)
            return partitions.map { max(offsets[$0] ?? 0, 0) }
        }
    }

    static func eventually(_ timeout: Duration = .seconds(20), _ condition: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return await condition()
    }

    @Test("every message is answered once and the group's offsets pass them all after a graceful stop")
    func commitsBehindAnswers() async throws {
        let cluster = try Cluster()
        let values = (0..<30).map { "ok-\($0)" }
        try await cluster.produce(values)
        let handler = Handler(out: cluster.out)
        let runtime = try cluster.runtime(handler)
        let running = Task { try await runtime.run(subscribing: [cluster.jobs]) }
        #expect(await Self.eventually { values.allSatisfy { handler.count($0) == 1 } }, "not every message handled")
        let published = try await cluster.read(cluster.out, count: 30)
        #expect(Set(published.map { String(decoding: $0.value, as: UTF8.self) }) == Set(values))
        // Committed while running, by the runtime's commit rounds (not only at the stop).
        var whileRunning: [Int64] = []
        let committedWhileRunning = await Self.eventually {
            whileRunning = (try? await cluster.committedOffsets()) ?? []
            return whileRunning.reduce(0, +) == 30
        }
        #expect(committedWhileRunning, "committed while running \(whileRunning)")
        runtime.shutdown()
        try await running.value
        let committed = try await cluster.committedOffsets()
        #expect(committed.reduce(0, +) == 30, "committed \(committed)")
    }

    @Test("commits failing (the ledger down) stall the partitions but never make the runtime look wedged to /healthz")
    func commitOutageIsNotWedged() async throws {
        struct LedgerDown: Error {}
        let cluster = try Cluster()
        let values = (0..<10).map { "ok-\($0)" }
        try await cluster.produce(values)
        let handler = Handler(out: cluster.out)
        let runtime = try cluster.runtime(
            handler, stallTimeout: .milliseconds(100), recordOffsets: { _ in throw LedgerDown() })
        let running = Task { try await runtime.run(subscribing: [cluster.jobs]) }
        #expect(await Self.eventually { values.allSatisfy { handler.count($0) == 1 } }, "not every message handled")
        // Five stall timeouts and more, every message answered and none committed: the lag stands still.
        #expect(await Self.eventually { !runtime.stalledPartitions().isEmpty }, "the partitions should look stalled")
        // Stalled for five stall timeouts and more (a wedge's length: 0.5 s, counted in whole seconds). A busy
        // machine may rebalance the group meanwhile; the partitions come back and stall again.
        #expect(
            await Self.eventually(.seconds(30)) { runtime.stalledPartitions().contains { $0.seconds >= 1 } },
            "the partitions should stay stalled")
        #expect(runtime.wedged.isEmpty, "a restart does not bring the ledger back: \(runtime.wedged)")
        runtime.shutdown()
        _ = try? await running.value
    }

    @Test(
        "a message dead-lettered carries its reason and the headers that say what it is, and is committed past like an answer"
    )
    func deadLetters() async throws {
        let cluster = try Cluster()
        try await cluster.produce(
            ["bad-1", "ok-1"],
            headers: [
                MessageHeader(name: "source", string: "subscription_status"),
                MessageHeader(name: "bundle_id", string: "com.example"), MessageHeader(name: "x-other", string: "-"),
                // Put back by an earlier replay: where it was first read goes on with it.
                MessageHeader(name: "dlq_replayed_from", string: "receipt-dlq[0]@5"),
                MessageHeader(name: "dlq_first_read", string: "receipt-jobs[2]@17"),
            ])
        let handler = Handler(out: cluster.out)
        let runtime = try cluster.runtime(handler)
        let running = Task { try await runtime.run(subscribing: [cluster.jobs]) }
        let letters = try await cluster.read(cluster.dlq, count: 1)
        #expect(letters.first?.header("dlq_first_read")?.stringValue == "receipt-jobs[2]@17")
        #expect(letters.count == 1)
        #expect(letters.first?.header("dlq_reason")?.stringValue == "malformed_job")
        #expect(letters.first.map { String(decoding: $0.value, as: UTF8.self) } == "bad-1", "the message unchanged")
        // What a replay needs to read it as it was (a subscription's status, not Apple's notification); no other.
        #expect(letters.first?.header("source")?.stringValue == "subscription_status")
        #expect(letters.first?.header("bundle_id")?.stringValue == "com.example")
        #expect(letters.first?.header("x-other") == nil)
        #expect(await Self.eventually { handler.count("ok-1") == 1 })
        runtime.shutdown()
        try await running.value
        let committed = try await cluster.committedOffsets()
        #expect(committed.reduce(0, +) == 2, "committed \(committed)")
    }

    @Test(
        "an answer the broker refuses for good (too large for its topic) has its message dead-lettered for a replay, not left holding the partition's commits"
    )
    func refusedAnswer() async throws {
        let cluster = try Cluster()
        try await cluster.produce(["ok-1"])
        // The runtime's first two Produce requests: the answer, and the answer sent again alone.
        cluster.mock.refuseProduceAsTooLarge(count: 2)
        let handler = Handler(out: cluster.out)
        let runtime = try cluster.runtime(handler)
        let running = Task { try await runtime.run(subscribing: [cluster.jobs]) }
        let letters = try await cluster.read(cluster.dlq, count: 1)
        #expect(letters.map { String(decoding: $0.value, as: UTF8.self) } == ["ok-1"])
        #expect(letters.first?.header("dlq_reason")?.stringValue == "retries_exhausted")
        #expect(letters.first?.header("dlq_error")?.stringValue?.contains("refused the message's answer") == true)
        runtime.shutdown()
        try await running.value
        let committed = try await cluster.committedOffsets()
        #expect(committed.reduce(0, +) == 1, "committed \(committed)")
    }

    @Test(
        "an answer refused once as too large (the broker refuses a whole batch for one record) is sent again alone and published, not dead-lettered"
    )
    func answerRefusedWithItsBatch() async throws {
        let cluster = try Cluster()
        try await cluster.produce(["ok-1"])
        cluster.mock.refuseProduceAsTooLarge(count: 1)
        let handler = Handler(out: cluster.out)
        let runtime = try cluster.runtime(handler)
        let running = Task { try await runtime.run(subscribing: [cluster.jobs]) }
        let published = try await cluster.read(cluster.out, count: 1)
        #expect(published.map { String(decoding: $0.value, as: UTF8.self) } == ["ok-1"])
        runtime.shutdown()
        try await running.value
        #expect(try await cluster.read(cluster.dlq, count: 1, timeout: .seconds(2)).isEmpty)
        let committed = try await cluster.committedOffsets()
        #expect(committed.reduce(0, +) == 1, "committed \(committed)")
    }

    @Test(
        "an answer refused with its batch, whose send alone then fails for a while (an ACL not yet granted), is sent until published, not let go"
    )
    func answerSentAloneRetried() async throws {
        let cluster = try Cluster()
        try await cluster.produce(["ok-1"])
        cluster.mock.refuseProduce([.tooLarge, .unauthorized, .unauthorized])
        let handler = Handler(out: cluster.out)
        let runtime = try cluster.runtime(handler)
        let running = Task { try await runtime.run(subscribing: [cluster.jobs]) }
        let published = try await cluster.read(cluster.out, count: 1)
        #expect(published.map { String(decoding: $0.value, as: UTF8.self) } == ["ok-1"])
        #expect(handler.count("ok-1") == 1, "handled once: its answer was sent again, not the message handled again")
        // Committed while the runtime runs on: a message let go would hold its partition's commits until a restart.
        #expect(await Self.eventually { (try? await cluster.committedOffsets().reduce(0, +)) == 1 })
        runtime.shutdown()
        try await running.value
        #expect(try await cluster.read(cluster.dlq, count: 1, timeout: .seconds(2)).isEmpty)
    }

    @Test(
        "a message whose dead letter is refused, then its stub (a key past the broker's limit), is dead-lettered bare, keyed by its place, and committed past"
    )
    func deadLetterStubRefused() async throws {
        let cluster = try Cluster()
        try await cluster.produce(["bad-1"])
        cluster.mock.refuseProduceAsTooLarge(count: 2)
        let handler = Handler(out: cluster.out)
        let runtime = try cluster.runtime(handler)
        let running = Task { try await runtime.run(subscribing: [cluster.jobs]) }
        let letters = try await cluster.read(cluster.dlq, count: 1)
        let letter = try #require(letters.first)
        let place = "\(cluster.jobs)[\(letter.header("dlq_source_partition")?.stringValue ?? "?")]@0"
        #expect(letter.key.map { String(decoding: $0, as: UTF8.self) } == place)
        #expect(letter.value.isEmpty && letter.header("dlq_truncated")?.stringValue == "true")
        #expect(letter.header("dlq_reason")?.stringValue == "malformed_job")
        #expect(letter.headers.allSatisfy { $0.name.hasPrefix("dlq_") }, "bare: the dlq_* headers alone")
        #expect(!runtime.isStopping)
        runtime.shutdown()
        try await running.value
        let committed = try await cluster.committedOffsets()
        #expect(committed.reduce(0, +) == 1, "committed \(committed)")
    }

    @Test(
        "a handler's transient error is handled again in its slot, never dead-lettered; past its budget the dead letter says retries_exhausted"
    )
    func transientFailures() async throws {
        let cluster = try Cluster()
        try await cluster.produce(["flaky-1", "broken-1", "ok-1"])
        let handler = Handler(out: cluster.out)
        let runtime = try cluster.runtime(handler)
        let running = Task { try await runtime.run(subscribing: [cluster.jobs]) }
        // Answered at its third handling, as if it never failed.
        let published = try await cluster.read(cluster.out, count: 2)
        #expect(Set(published.map { String(decoding: $0.value, as: UTF8.self) }) == ["flaky-1", "ok-1"])
        #expect(handler.count("flaky-1") == 3)
        // Handled retry.max_attempts times, then dead-lettered for a replay, with its handlings counted.
        let letters = try await cluster.read(cluster.dlq, count: 1)
        #expect(letters.map { String(decoding: $0.value, as: UTF8.self) } == ["broken-1"])
        #expect(letters.first?.header("dlq_reason")?.stringValue == "retries_exhausted")
        #expect(letters.first?.header("dlq_attempts")?.stringValue == "4")
        #expect(handler.count("broken-1") == 4)
        runtime.shutdown()
        try await running.value
        let committed = try await cluster.committedOffsets()
        #expect(committed.reduce(0, +) == 3, "committed \(committed)")
    }

    @Test(
        "a message still handled when the drain times out is let go, never committed past, and delivered again to the next member"
    )
    func drainLetsGo() async throws {
        let cluster = try Cluster()
        try await cluster.produce(["slow-1"] + (0..<10).map { "ok-\($0)" })
        let first = Handler(out: cluster.out)
        let rounds = Mutex<[[TopicPartition: Int64]]>([])
        let runtime = try cluster.runtime(
            first, drain: .milliseconds(300), recordOffsets: { offsets in rounds.withLock { $0.append(offsets) } })
        let running = Task { try await runtime.run(subscribing: [cluster.jobs]) }
        #expect(await Self.eventually { first.count("slow-1") == 1 })
        #expect(try await cluster.read(cluster.out, count: 10).count == 10, "the others were not answered")
        // The commit loop has run with the slow message in flight: it committed the other partition in full.
        let slowPartition = try #require(first.partition("slow-1"))
        let other = TopicPartition(topic: cluster.jobs, partition: 1 - slowPartition)
        let answeredThere = Int64((0..<10).filter { first.partition("ok-\($0)") != slowPartition }.count)
        #expect(
            await Self.eventually { rounds.withLock { $0 }.contains { $0[other] == answeredThere } },
            "no commit round after the answers: \(rounds.withLock { $0 })")
        let slowHeld = TopicPartition(topic: cluster.jobs, partition: slowPartition)
        #expect(rounds.withLock { $0 }.allSatisfy { ($0[slowHeld] ?? 0) == 0 }, "committed past the slow message")
        let stopped = ContinuousClock.now
        runtime.shutdown()
        try await running.value
        #expect(ContinuousClock.now - stopped < .seconds(10), "the drain timeout did not hold")
        // The slow message (its partition's first) is not committed past; the other partition is, in full.
        let slow = try #require(first.partition("slow-1"))
        let committed = try await cluster.committedOffsets()
        let elsewhere = (0..<10).filter { first.partition("ok-\($0)") != slow }.count
        #expect(committed[Int(slow)] == 0, "committed past the message let go: \(committed)")
        #expect(committed[Int(1 - slow)] == Int64(elsewhere), "the answered partition not committed: \(committed)")
        // The next member of the group gets the let-go message again.
        let second = Handler(out: cluster.out)
        let next = try cluster.runtime(second)
        let again = Task { try await next.run(subscribing: [cluster.jobs]) }
        #expect(await Self.eventually { second.count("slow-1") == 1 }, "the let-go message was not delivered again")
        next.shutdown()
        try await again.value
    }

    @Test("partitions handed to a new member mid-stream: every message answered, and committed past once both stop")
    func revocation() async throws {
        let cluster = try Cluster()
        let values = (0..<40).map { "ok-\($0)" }
        try await cluster.produce(Array(values.prefix(20)))
        let first = Handler(out: cluster.out)
        let one = try cluster.runtime(first)
        let runningOne = Task { try await one.run(subscribing: [cluster.jobs]) }
        #expect(await Self.eventually { values.prefix(20).allSatisfy { first.count($0) == 1 } })
        // A second member joins: the group rebalances, each member drains and commits what it gives up.
        let second = Handler(out: cluster.out)
        let two = try cluster.runtime(second)
        let runningTwo = Task { try await two.run(subscribing: [cluster.jobs]) }
        // Generous: a rebalance on two busy cores (the whole suite beside it) has taken over 20 s.
        #expect(
            await Self.eventually(.seconds(90)) { !two.assignedPartitions.isEmpty },
            "the second member got no partition")
        try await cluster.produce(Array(values.suffix(20)))
        #expect(
            await Self.eventually(.seconds(90)) { values.allSatisfy { first.count($0) + second.count($0) >= 1 } },
            "not every message answered")
        // One member leaves at a time, as a rolling restart stops them: the other takes its partitions back and
        // commits past every message. (Two members leaving at once may each lose its last commit to the other's
        // rebalance: the messages are then delivered again after the restart, as at least once allows.)
        two.shutdown()
        try await runningTwo.value
        let checker = try cluster.runtime(Handler(out: cluster.out))
        _ = await Self.eventually(.seconds(90)) {
            (try? await cluster.committed(using: checker))?.reduce(0, +) == 40
        }
        one.shutdown()
        try await runningOne.value
        let committed = try await cluster.committed(using: checker)
        #expect(committed.reduce(0, +) == 40, "committed \(committed)")
        // Delivered more than once is allowed (at least once, docs/contract.md section 6): librdkafka's mock
        // cluster hands partitions back from their start after a rebalance, where Kafka (the end-to-end suites,
        // on Tansu) resumes at the committed offset.
    }

    @Test(
        "a message waiting where no let-go is looked at (a lane Apple paused for minutes) ends when its partition is released"
    )
    func releaseEndsDeafWaits() async throws {
        let cluster = try Cluster()
        let values = (1...6).map { "deaf-\($0)" }
        try await cluster.produce(values)
        let first = Handler(out: cluster.out)
        let one = try cluster.runtime(first, drain: .milliseconds(300))
        let runningOne = Task { try await one.run(subscribing: [cluster.jobs]) }
        #expect(await Self.eventually { values.allSatisfy { first.count($0) == 1 } })
        #expect(Set(values.compactMap { first.partition($0) }).count == 2, "the waits are not on both partitions")
        #expect(values.allSatisfy { first.ended($0) == 0 })
        // A second member joins: the partitions it takes are released by the first after its drain.
        let second = Handler(out: cluster.out)
        let two = try cluster.runtime(second)
        let runningTwo = Task { try await two.run(subscribing: [cluster.jobs]) }
        #expect(
            await Self.eventually(.seconds(90)) { !two.assignedPartitions.isEmpty },
            "the second member got no partition")
        let moved = Set(two.assignedPartitions.map(\.partition))
        let waitsMoved = values.filter { first.partition($0).map(moved.contains) ?? false }
        #expect(!waitsMoved.isEmpty)
        #expect(
            await Self.eventually { waitsMoved.allSatisfy { first.ended($0) >= 1 } },
            "waits on released partitions still held: \(waitsMoved.filter { first.ended($0) == 0 })")
        two.shutdown()
        one.shutdown()
        try await runningTwo.value
        try await runningOne.value
    }

    @Test(
        "a topic whose traces begin here: the process span is the root of the trace the record names, recorded by the ratio, and an unrecorded trace goes on unsampled",
        arguments: [0.0, 1.0, nil])
    func tracesBeginHere(ratio: Double?) async throws {
        let cluster = try Cluster()
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        // What the receiver puts on a notification's record: a trace of its own, flagged sampled, nothing recorded.
        try await cluster.produce(
            ["ok-1"], headers: [MessageHeader(name: "traceparent", string: "00-\(trace)-00f067aa0ba902b7-01")])
        let spans = Mutex<[FinishedSpan]>([])
        // nil: the worker does not trace at all.
        let tracer = ratio.map { ratio in Tracer(sampleRatio: ratio) { span in spans.withLock { $0.append(span) } } }
        let runtime = try cluster.runtime(Handler(out: cluster.out), beginsTraces: true, tracer: tracer)
        let running = Task { try await runtime.run(subscribing: [cluster.jobs]) }
        let answer = try #require(try await cluster.read(cluster.out, count: 1).first)
        runtime.shutdown()
        try await running.value
        let carried = try #require(answer.header("traceparent")?.stringValue)
        #expect(carried.hasPrefix("00-\(trace)-"), "the event does not go on in the record's trace: \(carried)")
        let recorded = spans.withLock { $0 }
        if ratio != 1 {
            #expect(recorded.isEmpty, "recorded though the ratio is 0")
            #expect(carried.hasSuffix("-00"), "an unrecorded trace passed on as sampled: \(carried)")
        } else {
            let process = try #require(recorded.first { $0.name.hasPrefix("process ") })
            #expect(process.parentSpanID == nil, "the process span is not the trace's root")
            #expect(process.context.traceparent.hasPrefix("00-\(trace)-") && carried.hasSuffix("-01"))
        }
    }
}
