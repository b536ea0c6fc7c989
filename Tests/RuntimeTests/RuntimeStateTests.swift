import Kafka
import Testing

@testable import Runtime

@Suite("The runtime's state besides partitions and slots")
struct RuntimeStateTests {
    @Test("a commit failing every 200 ms is said once, then every 30 s while it lasts, and again after a success")
    func commitFailuresSaidSparingly() {
        var state = RuntimeState()
        let start = ContinuousClock.now
        #expect(state.commitsSucceed)
        let first = state.commitFailed(at: start)
        #expect(first)
        #expect(!state.commitsSucceed, "unready-worthy until a commit succeeds")
        let quiet = (1..<150).map { state.commitFailed(at: start + .milliseconds(200 * $0)) }
        #expect(!quiet.contains(true), "29.8 s of retries: nothing more said")
        let again = state.commitFailed(at: start + .seconds(30))
        #expect(again, "said again after 30 s")
        state.commitSucceeded()
        #expect(state.commitsSucceed)
        let newOutage = state.commitFailed(at: start + .seconds(31))
        #expect(newOutage, "a new outage is said at once")
        let park = state.parkFailed(at: start + .seconds(31))
        #expect(park, "parks keep their own account")
    }

    @Test("lags: a measurement replaces what it measured, a partition given up or no longer assigned forgets its lag")
    func lags() {
        var state = RuntimeState()
        let (a, b, c) = (
            TopicPartition(topic: "jobs", partition: 0), TopicPartition(topic: "jobs", partition: 1),
            TopicPartition(topic: "jobs", partition: 2)
        )
        state.measured([a: 5, b: 7, c: 1], assigned: [a, b, c])
        state.measured([a: 2], assigned: [a, b])  // b's watermarks unreadable: it keeps 7; c went elsewhere
        #expect(state.lags == [a: 2, b: 7])
        state.released([b])
        #expect(state.lags == [a: 2])
    }
}
