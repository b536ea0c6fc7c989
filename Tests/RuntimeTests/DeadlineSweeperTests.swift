import Foundation
import Lifecycle
@testable import Runtime
import Synchronization
import Testing

@Suite("Deadlines for many waits at once")
struct DeadlineSweeperTests {
    @Test("a wait that finishes in time returns its own error or nothing; one that does not gets the timeout")
    func withinAnswersInTime() async throws {
        struct Late: Error {}
        struct Own: Error {}
        // Deadlines of a minute for the waits that finish at once: on a busy machine a task may wait seconds
        // for a thread, and the deadline is the clock's, not the pool's.
        try await withDeadline(.seconds(60), timeout: Late()) {}
        await #expect(throws: Own.self) { try await withDeadline(.seconds(60), timeout: Late()) { throw Own() } }
        let started = ContinuousClock.now
        await #expect(throws: Late.self) {
            try await withDeadline(.milliseconds(200), timeout: Late()) { try await Task.sleep(for: .seconds(30)) }
        }
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(200) && waited < .seconds(25), "\(waited): the body's 30 s, not the deadline")
    }

    @Test("deadlines fire once each, never before their time; cancelled ones never; the sweeper stops when idle")
    func firesOnceAndCancels() async throws {
        let sweeper = DeadlineSweeper(resolution: .milliseconds(20))
        let started = ContinuousClock.now
        let fired = Mutex<[(index: Int, after: Duration)]>([])
        var ids: [UInt64] = []
        for index in 0..<1_000 {
            ids.append(
                sweeper.schedule(after: .milliseconds(100 + index % 3 * 100)) {
                    let after = ContinuousClock.now - started
                    fired.withLock { $0.append((index, after)) }
                })
        }
        for (index, id) in ids.enumerated() where index % 2 == 1 { sweeper.cancel(id) }
        let deadline = ContinuousClock.now + .seconds(30)
        while fired.withLock({ $0.count }) < 500 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        // Idle, then used again: a new sweep starts. It fires after every sweep before it has run its due
        // deadlines: the 500 include deadline 998, the last of all 1,000, so every cancelled one's time has come
        // and gone by then.
        let again = Mutex(false)
        _ = sweeper.schedule(after: .milliseconds(10)) { again.withLock { $0 = true } }
        let retry = ContinuousClock.now + .seconds(30)
        while !again.withLock({ $0 }) && ContinuousClock.now < retry { try await Task.sleep(for: .milliseconds(20)) }
        #expect(again.withLock { $0 })
        let all = fired.withLock { $0 }
        #expect(all.count == 500 && Set(all.map(\.index)).count == 500)
        #expect(all.allSatisfy { $0.index % 2 == 0 }, "a cancelled deadline fired")
        for early in all where early.after < .milliseconds(100 + early.index % 3 * 100) {
            Issue.record("deadline \(early.index) fired after \(early.after)")
        }
    }

    @Test("a deadline fires on time while Swift's cooperative pool is blocked")
    func onTimeWhilePoolIsBlocked() async throws {
        let sweeper = DeadlineSweeper(resolution: .milliseconds(20))
        let fired = Mutex<ContinuousClock.Instant?>(nil)
        let scheduled = ContinuousClock.now
        _ = sweeper.schedule(after: .milliseconds(200)) { fired.withLock { $0 = .now } }
        // Every thread of the pool held until the deadline fires (or 900 ms): a deadline kept by a task of that
        // pool would wait for them.
        let hasFired: @Sendable () -> Bool = { fired.withLock { $0 } != nil }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<ProcessInfo.processInfo.activeProcessorCount {
                group.addTask {
                    while !hasFired() && ContinuousClock.now - scheduled < .milliseconds(900) { usleep(5_000) }
                }
            }
        }
        let at = try #require(fired.withLock { $0 })
        #expect(at - scheduled >= .milliseconds(200))
        #expect(at - scheduled < .milliseconds(900), "\(at - scheduled)")
    }
}
