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
        let producer = Mutex<String?>(nil)
        Thread.detach {
            producer.withLock { $0 = Self.currentThreadStat() }
            for batch in 0..<3 {
                channel.push([batch])
                pushed.add(1, ordering: .relaxed)
            }
            done.signal()
        }
        // The third push must be blocked: nothing has been read. Shown by the producer thread asleep after the
        // second push (in the third's wait for room), or pushing a third time when it should not.
        #expect(
            await eventually(timeout: .seconds(30)) {
                let count = pushed.load(ordering: .relaxed)
                guard count == 2, let stat = producer.withLock({ $0 }) else { return count > 2 }
                return Self.isAsleep(stat)
            })
        #expect(pushed.load(ordering: .relaxed) == 2)
        #expect(done.wait(timeout: .now()) == .timedOut)
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
        let executor = CountingExecutor()
        let reader = Task(executorPreference: executor) { await channel.next() }
        // Waiting in `next()`: the reader's task ran and suspended (the channel is empty, so it cannot have ended).
        #expect(await eventually(timeout: .seconds(30)) { executor.isIdle })
        reader.cancel()
        #expect(await reader.value == nil)
        #expect(!channel.isFinished)
        channel.push([7])
        #expect(await channel.next() == [7])
    }
}

extension EventChannelTests {
    /// `/proc/self/task/TID/stat` of the calling thread (Linux).
    static func currentThreadStat() -> String? {
        guard let task = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self") else {
            return nil
        }
        return "/proc/\(task)/stat"
    }

    /// Whether the thread whose stat file is `path` is asleep (state S: waiting on a semaphore, say).
    static func isAsleep(_ path: String) -> Bool {
        guard let stat = try? String(contentsOfFile: path, encoding: .utf8),
            let name = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: name)...].trimmingCharacters(in: .whitespaces).hasPrefix("S")
    }
}

extension Thread {
    static func detach(_ body: @escaping @Sendable () -> Void) {
        Thread(block: body).start()
    }
}
