import Foundation
import Kafka
import Observability
import ReceiptWorker
import Synchronization
import TestSupport
import Testing

@Suite("A fatal Kafka error", .timeLimit(.minutes(2)))
struct FatalErrorTests {
    @Test("ends run() with the error within seconds, even idle: the process exits 1 and is restarted, not left alive")
    func endsRun() async throws {
        let harness = try await WorkerHarness()
        var configuration = harness.configuration
        configuration.kafka["group.id"] = "fatal-\(UUID().uuidString.prefix(8))"
        let worker = try await WorkerAssembly.make(configuration, logger: Logger(label: "fatal", minimumLevel: .error))
        let outcome = Mutex<String?>(nil)
        let running = Task {
            do {
                try await worker.run()
                outcome.withLock { $0 = "returned" }
            } catch {
                outcome.withLock { $0 = "threw \(error)" }
            }
        }
        #expect(await eventually(timeout: .seconds(60)) { worker.isReady })
        // Idle: the task that starts jobs waits for one; a fatal error must wake it too.
        worker.raiseFatalErrorForTesting()
        #expect(await eventually(timeout: .seconds(60)) { outcome.withLock { $0 } != nil })
        let ended = outcome.withLock { $0 } ?? "still running"
        #expect(ended.hasPrefix("threw") && ended.contains("a test's fatal error"), "\(ended)")
        running.cancel()
        await harness.stop()
    }
}
