import Kafka
import Observability
import Synchronization
import TestSupport
import ReceiptWorker
import Testing

/// A topic the worker would read, missing when it started (its receivers deployed later, say): once created, the
/// worker does not read it before a restart, and says so where an orchestrator restarts it.
@Suite("A topic created after the worker started", .timeLimit(.minutes(3)))
struct UnreadTopicTests {
    @Test("a consumption topic created after the worker started makes /healthz ask for a restart, naming it")
    func topicCreatedLater() async throws {
        let lines = Mutex<[String]>([])
        let harness = try await WorkerHarness(workerLog: LogSink { line in lines.withLock { $0.append(line) } })
        // Started without it.
        #expect(
            await eventually(timeout: .seconds(30)) { lines.withLock { $0.contains { $0.contains("worker started") } } }
        )
        #expect(harness.worker.liveness.isEmpty, "\(harness.worker.liveness)")
        try await KafkaAdmin.createTopics(
            bootstrapServers: WorkerHarness.bootstrap, topics: [(harness.topics.consumption, 1)],
            logger: WorkerHarness.logger)
        // Within a round of looking (15 s) and this replica's own delay (up to a minute).
        let asked = await eventually(timeout: .seconds(120)) {
            harness.worker.liveness.contains { $0.contains("topics.consumption") && $0.contains("restart") }
        }
        #expect(asked, "\(harness.worker.liveness)\n\(lines.withLock { $0 }.suffix(40).joined(separator: "\n"))")
        await harness.stop()
    }
}
