import Foundation
import Dispatch
import Synchronization
import TestSupport
import Testing

@testable import Kafka

@Suite("The consumer's bounded event channel")
struct EventChannelTests {
    @Test("a full channel blocks the polling thread until the reader takes a batch")
    func fullChannelBlocksProducer() async throws {
        let channel = EventChannel<Int>(capacity: 2)
        let pushed = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        Thread.detach {
            for batch in 0..<3 {
                channel.push([batch])
                pushed.add(1, ordering: .relaxed)
            }
            done.signal()
        }
        #expect(await eventually(timeout: .seconds(5)) { pushed.load(ordering: .relaxed) == 2 })
        // The third push must still be blocked: nothing has been read.
        #expect(done.wait(timeout: .now() + .milliseconds(300)) == .timedOut)
        #expect(await channel.next() == [0])
        #expect(await eventually(timeout: .seconds(5)) { pushed.load(ordering: .relaxed) == 3 })
        #expect(await channel.next() == [1])
        #expect(await channel.next() == [2])
    }

    @Test("finishing wakes a waiting reader with nil and unblocks a blocked producer")
    func finishEndsBothSides() async throws {
        let channel = EventChannel<Int>(capacity: 1)
        channel.push([1])
        let result = Atomic<Int>(-1)
        Thread.detach { result.store(channel.push([2]) ? 1 : 0, ordering: .relaxed) }
        channel.finish()
        #expect(await eventually(timeout: .seconds(5)) { result.load(ordering: .relaxed) == 0 })
        #expect(await channel.next() == nil)
    }

    @Test("a cancelled reader gets nil while the channel stays open")
    func cancellationEndsRead() async throws {
        let channel = EventChannel<Int>(capacity: 1)
        let reader = Task { await channel.next() }
        try await Task.sleep(for: .milliseconds(50))
        reader.cancel()
        #expect(await reader.value == nil)
        #expect(!channel.isFinished)
        channel.push([7])
        #expect(await channel.next() == [7])
    }
}

extension Thread {
    static func detach(_ body: @escaping @Sendable () -> Void) {
        Thread(block: body).start()
    }
}
