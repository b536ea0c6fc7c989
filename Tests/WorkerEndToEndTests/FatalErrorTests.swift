import Foundation
import Kafka
import Observability
import ReceiptWorker
import Synchronization
import TestSupport
import Testing

@Suite("A fatal Kafka error", .timeLimit(.minutes(2)))
struct FatalErrorTests {
    /// Whose fatal error a test raises, and what run() then throws.
    enum FailingClient: String, CaseIterable, Sendable {
        case consumer, producer

        var reason: String { self == .consumer ? "a test's fatal error" : "a test's fatal producer error" }
    }

    @Test(
        "a fatal error of the consumer or the producer ends run() within seconds, even idle (the task that starts jobs waits for one; the producer's receiver and chores need it too): the process exits 1 and is restarted, not left alive",
        arguments: FailingClient.allCases)
    func endsRunIdle(_ client: FailingClient) async throws {
        let harness = try await WorkerHarness()
        let running = try await RunningWorker(beside: harness)
        #expect(await eventually(timeout: .seconds(60)) { running.worker.isReady })
        switch client {
        case .consumer: running.worker.raiseFatalErrorForTesting()
        case .producer: running.worker.raiseProducerFatalErrorForTesting()
        }
        let ended = await running.ended()
        #expect(ended.hasPrefix("threw") && ended.contains(client.reason), "\(ended)")
        running.cancel()
        await harness.stop()
    }

    @Test(
        "a fatal error of the producer ends run() too: the job whose answer could not be sent is not committed, and is answered after the restart"
    )
    func producerEndsRun() async throws {
        let harness = try await WorkerHarness()
        let running = try await RunningWorker(beside: harness)
        #expect(await eventually(timeout: .seconds(60)) { running.worker.isReady })
        running.worker.raiseProducerFatalErrorForTesting()
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        try await harness.submit(
            job("after-fatal", order: "o-after-fatal", product: "coins.100", ["receipt": purchase.receipt]))
        let ended = await running.ended()
        #expect(ended.hasPrefix("threw") && ended.contains("a test's fatal producer error"), "\(ended)")
        // The harness's own worker (a group of its own) answers the job once; the stopped one could not.
        #expect(await eventually(timeout: .seconds(60)) { !harness.results(jobID: "after-fatal").isEmpty })
        try await Task.sleep(for: .seconds(1))
        #expect(harness.results(jobID: "after-fatal").count == 1)
        // The restarted replica (the same group and ledger) reads the job again, never committed, and answers it:
        // the ledger's answer, the same event.
        let restarted = try await WorkerAssembly.make(running.configuration, logger: RunningWorker.logger)
        let second = Task { try await restarted.run() }
        #expect(await eventually(timeout: .seconds(60)) { harness.results(jobID: "after-fatal").count == 2 })
        let events = harness.results(jobID: "after-fatal")
        #expect(Set(events.map { $0["event_id"] as? String }).count == 1, "\(events)")
        #expect(events.allSatisfy { $0["decision"] as? String == "grant" })
        restarted.shutdown()
        _ = await second.result
        running.cancel()
        await harness.stop()
    }
}

/// A worker of a consumer group of its own beside the harness's (which answers every job too), running from its
/// creation, and how its `run()` ended.
private final class RunningWorker: Sendable {
    static let logger = Logger(label: "fatal", minimumLevel: .error)
    let configuration: WorkerConfiguration
    let worker: Worker
    private let outcome = Mutex<String?>(nil)
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(beside harness: WorkerHarness) async throws {
        var configuration = harness.configuration
        configuration.kafka["group.id"] = "fatal-\(UUID().uuidString.prefix(8))"
        self.configuration = configuration
        worker = try await WorkerAssembly.make(configuration, logger: Self.logger)
        let started = Task { [self] in
            do {
                try await worker.run()
                outcome.withLock { $0 = "returned" }
            } catch {
                outcome.withLock { $0 = "threw \(error)" }
            }
        }
        task.withLock { $0 = started }
    }

    /// How `run()` ended ("returned", "threw …"), waited for up to a minute; "still running" after that.
    func ended() async -> String {
        _ = await eventually(timeout: .seconds(60)) { self.outcome.withLock { $0 } != nil }
        return outcome.withLock { $0 } ?? "still running"
    }

    func cancel() { task.withLock { $0 }?.cancel() }
}
