import Synchronization
import Testing

@testable import AppleVerification

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
            // The cool-down over, the first caller through is the trial.
            let deadline = ContinuousClock.now + .seconds(30)
            while passed.value.load(ordering: .relaxed) == 0 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            // The others woke at the same moment and now look again every 50 ms: nothing signals a look, so two of
            // them are the window in which a stampede would show (the scenario: the breaker's hold is a poll).
            try await Task.sleep(for: .milliseconds(100))
            #expect(passed.value.load(ordering: .relaxed) == 1, "one trial, not a stampede")
            breaker.record(success: true)
            try await group.waitForAll()
        }
        #expect(passed.value.load(ordering: .relaxed) == 20)
        #expect(breaker.state == .closed)
    }

    @Test("reading the state (a metrics scrape) past the cool-down does not hold back the next trial")
    func stateReadDoesNotDelayTrial() async throws {
        let breaker = openBreaker()
        await breaker.waitUntilCallsAllowed()  // the first trial
        breaker.record(success: false)  // fails: open again, for 100 ms
        // Scrapes, again and again, until one reads the cool-down over.
        let deadline = ContinuousClock.now + .seconds(30)
        while breaker.state != .halfOpen && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(breaker.state == .halfOpen)
        let started = ContinuousClock.now
        await breaker.waitUntilCallsAllowed()  // the second trial: at once, not 30 s after the first
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test(
        "an answer that says nothing of Apple's health (21002 for a receipt Apple never signed) counts neither way, and gives a half-open trial back"
    )
    func neither() async throws {
        let closed = CircuitBreaker(windowSize: 10, minimumCalls: 4, failureRatio: 0.5, cooldown: .milliseconds(50))
        for _ in 0..<3 { closed.record(success: false) }
        for _ in 0..<20 { closed.recordNeither() }
        #expect(closed.state == .closed)
        closed.record(success: false)
        #expect(closed.state == .open, "garbage's answers diluted the failures of genuine calls")
        let breaker = openBreaker()
        try await Task.sleep(for: .milliseconds(80))
        await breaker.waitUntilCallsAllowed()  // the trial
        breaker.recordNeither()
        // The next caller is through at once, not after the trial's 30 s timeout.
        let started = ContinuousClock.now
        await breaker.waitUntilCallsAllowed()
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(breaker.state == .halfOpen)
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
