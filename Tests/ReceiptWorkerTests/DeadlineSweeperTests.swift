import Foundation
import Synchronization
import Testing

@testable import ReceiptWorker

@Suite("Deadlines for many waits at once")
struct DeadlineSweeperTests {
    @Test("a wait that finishes in time returns its own error or nothing; one that does not gets the timeout")
    func withinAnswersInTime() async throws {
        struct Late: Error {}
        struct Own: Error {}
        try await Worker.within(.seconds(5), timeout: Late()) {}
        await #expect(throws: Own.self) { try await Worker.within(.seconds(5), timeout: Late()) { throw Own() } }
        let started = ContinuousClock.now
        await #expect(throws: Late.self) {
            try await Worker.within(.milliseconds(200), timeout: Late()) { try await Task.sleep(for: .seconds(30)) }
        }
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(200) && waited < .seconds(10), "\(waited)")
    }

    @Test("deadlines fire once each, not before their time; cancelled ones never; the sweeper stops when idle")
    func firesOnceAndCancels() async throws {
        let sweeper = DeadlineSweeper(resolution: .milliseconds(20))
        let fired = Mutex<[Int]>([])
        let started = ContinuousClock.now
        var ids: [UInt64] = []
        for index in 0..<1_000 {
            ids.append(
                sweeper.schedule(after: .milliseconds(100 + index % 3 * 100)) { fired.withLock { $0.append(index) } })
        }
        for (index, id) in ids.enumerated() where index % 2 == 1 { sweeper.cancel(id) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(fired.withLock { $0.isEmpty }, "a deadline fired before its time")
        let deadline = ContinuousClock.now + .seconds(30)
        while fired.withLock({ $0.count }) < 500 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .milliseconds(200))
        let all = fired.withLock { $0 }
        #expect(all.count == 500 && Set(all).count == 500)
        #expect(all.allSatisfy { $0 % 2 == 0 }, "a cancelled deadline fired")
        #expect(ContinuousClock.now - started >= .milliseconds(300))
        // Idle, then used again: a new sweep starts. (Waited for generously: beside 250 other tests on 2
        // cores, a sleeping task may wake seconds late.)
        let again = Mutex(false)
        _ = sweeper.schedule(after: .milliseconds(10)) { again.withLock { $0 = true } }
        let retry = ContinuousClock.now + .seconds(30)
        while !again.withLock({ $0 }) && ContinuousClock.now < retry { try await Task.sleep(for: .milliseconds(20)) }
        #expect(again.withLock { $0 })
    }
}
