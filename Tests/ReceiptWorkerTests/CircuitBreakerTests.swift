import Kafka
import Synchronization
import Testing

@testable import ReceiptWorker

@Suite("The circuit breaker")
struct CircuitBreakerTests {
    func openBreaker() -> CircuitBreaker {
        let breaker = CircuitBreaker(windowSize: 10, minimumCalls: 4, failureRatio: 0.5, cooldown: .milliseconds(50))
        for _ in 0..<4 { breaker.record(success: false) }
        return breaker
    }

    @Test("half-open, it lets one trial through and holds the others until the trial succeeds")
    func oneTrial() async throws {
        let breaker = openBreaker()
        #expect(breaker.state == .open)
        let passed = Counter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    await breaker.waitUntilCallsAllowed()
                    passed.value.add(1, ordering: .relaxed)
                }
            }
            try await Task.sleep(for: .milliseconds(400))
            #expect(passed.value.load(ordering: .relaxed) == 1, "one trial, not a stampede")
            breaker.record(success: true)
            try await group.waitForAll()
        }
        #expect(passed.value.load(ordering: .relaxed) == 20)
        #expect(breaker.state == .closed)
    }

    @Test("a failed trial re-opens it for twice the cool-down")
    func failedTrial() async throws {
        let breaker = openBreaker()
        await breaker.waitUntilCallsAllowed()
        breaker.record(success: false)
        #expect(breaker.state == .open)
    }
}

final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

@Suite("The worker's partition bookkeeping across assignments")
struct WorkerStateTests {
    @Test("a job of an earlier assignment cannot finish or abandon the same offset in flight again")
    func staleJobs() {
        let state = WorkerState()
        let partition = KafkaTopicPartition(topic: "jobs", partition: 0)
        state.assign([partition])
        let first = state.generation(of: partition)
        #expect(state.start(partition, offset: 5, generation: first))
        state.stopTaking([partition])
        state.release([partition])
        state.assign([partition])
        let second = state.generation(of: partition)
        #expect(second != first)
        #expect(!state.start(partition, offset: 7, generation: first), "a message read before the release")
        #expect(state.start(partition, offset: 5, generation: second))
        // The first assignment's job ends late: it must not touch the second's.
        state.abandon(partition, offset: 5, generation: first)
        state.finish(partition, offset: 5, generation: first)
        #expect(state.inFlight == 1)
        #expect(state.committable()[partition] == 5)
        state.finish(partition, offset: 5, generation: second)
        #expect(state.inFlight == 0)
        #expect(state.committable()[partition] == 6)
    }
}
