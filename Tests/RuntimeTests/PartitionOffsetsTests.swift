import Messaging
@testable import Runtime
import Testing

@Suite("Retry policy and partition offsets")
struct RetryAndOffsetTests {
    @Test("backoff doubles up to its ceiling, with full jitter, and honours Retry-After")
    func backoff() {
        var policy = RetryPolicy()
        policy.initialBackoff = .milliseconds(100)
        policy.maxBackoff = .seconds(1)
        policy.maxAttempts = 3
        #expect(policy.delay(afterAttempts: 1, retryAfter: nil, random: 1) == .milliseconds(100))
        #expect(policy.delay(afterAttempts: 3, retryAfter: nil, random: 1) == .milliseconds(400))
        #expect(policy.delay(afterAttempts: 10, retryAfter: nil, random: 1) == .seconds(1))
        #expect(policy.delay(afterAttempts: 3, retryAfter: nil, random: 0) == .zero)
        #expect(policy.delay(afterAttempts: 1, retryAfter: .milliseconds(700), random: 0.5) == .milliseconds(700))
        // A Retry-After far away is clamped to the ceiling: it must not park a job.
        #expect(policy.delay(afterAttempts: 1, retryAfter: .seconds(31_536_000_000), random: 0.5) == .seconds(1))
        #expect(policy.mayRetry(afterAttempts: 2))
        #expect(!policy.mayRetry(afterAttempts: 3))
    }

    @Test("the committable offset never passes an unfinished job")
    func offsets() {
        var partition = PartitionOffsets()
        #expect(partition.committable == nil)
        for offset in [10, 11, 12, 13] as [Int64] { partition.start(offset) }
        #expect(partition.committable == 10)
        partition.finish(12)
        partition.finish(11)
        #expect(partition.committable == 10)
        #expect(partition.outstanding == 2)
        partition.finish(10)
        #expect(partition.committable == 13)
        partition.finish(13)
        #expect(partition.committable == 14)
        #expect(partition.outstanding == 0)
    }

    @Test("an offset delivered again is refused, in flight or finished, and changes nothing")
    func redelivered() {
        var partition = PartitionOffsets()
        let first = [partition.start(5), partition.start(6), partition.start(5)]
        #expect(first == [true, true, false])
        partition.finish(5)
        let again = [partition.start(5), partition.start(4)]
        #expect(again == [false, false])
        #expect(partition.committable == 6)
        #expect(partition.outstanding == 1)
    }

    @Test("all finished, the commit follows the consumer's position past transaction markers, never past a message")
    func positions() {
        var partition = PartitionOffsets()
        partition.advance(toPosition: 4)
        #expect(partition.committable == 4, "a partition of markers only")
        for offset in [10, 11] as [Int64] { partition.start(offset) }
        partition.advance(toPosition: 13)  // 12: a commit marker
        #expect(partition.committable == 10)
        partition.finish(10)
        #expect(partition.committable == 11)
        partition.finish(11)
        #expect(partition.committable == 13)
        partition.start(13)
        #expect(partition.committable == 13)
        partition.abandon(13)
        partition.advance(toPosition: 20)
        #expect(partition.committable == 13, "a message left for its next delivery holds the commit")
    }

    @Test("a long run of jobs finishing in reverse order keeps exact offsets")
    func longRun() {
        var partition = PartitionOffsets()
        for offset in 0..<5000 as Range<Int64> { partition.start(offset) }
        for offset in (1..<5000 as Range<Int64>).reversed() { partition.finish(offset) }
        #expect(partition.committable == 0)
        partition.finish(0)
        #expect(partition.committable == 5000)
    }
}
