import Synchronization
import Testing

@testable import Ledger

/// How the ledger's batcher groups requests: alone and at once when nothing else waits, together under load.
@Suite("The ledger's batches", .timeLimit(.minutes(1)))
struct BatcherTests {
    /// The batches a batcher ran, in order; the one holding request 0 waits until `release()` (20 s at most).
    final class Recorder: Sendable {
        private let batches = Mutex<[[Int]]>([])
        private let gate = AsyncStream<Void>.makeStream()

        func ran(_ requests: [Int]) async {
            batches.withLock { $0.append(requests) }
            guard requests.contains(0) else { return }
            // Released by the test, or after 20 s: a test whose wait failed ends failing, not hanging.
            await withTaskGroup(of: Void.self) { group in
                group.addTask { [gate] in
                    for await _ in gate.stream { break }
                }
                group.addTask { try? await Task.sleep(for: .seconds(20)) }
                await group.next()
                group.cancelAll()
            }
        }

        func release() { gate.continuation.yield() }
        var sizes: [Int] { batches.withLock { $0.map(\.count) } }
    }

    func batcher(maxBatch: Int = 256, recorder: Recorder) -> Batcher<Int, Int> {
        Batcher(maxBatch: maxBatch, maxConcurrent: 1) { requests in
            await recorder.ran(requests)
            return requests.map { $0 * 2 }
        }
    }

    @Test("requests one after another go alone, each with its own answer")
    func oneAfterAnother() async throws {
        let recorder = Recorder()
        let batcher = batcher(recorder: recorder)
        for request in 1...3 { #expect(try await batcher.submit(request) == request * 2) }
        #expect(recorder.sizes == [1, 1, 1])
    }

    @Test("requests that come while a batch runs go together in the next")
    func together() async throws {
        let recorder = Recorder()
        let batcher = batcher(recorder: recorder)
        async let first = batcher.submit(0)
        try await waitUntil { recorder.sizes == [1] }
        async let second = batcher.submit(1)
        async let third = batcher.submit(2)
        try await waitUntil { batcher.pendingCount == 2 }
        recorder.release()
        #expect(try await [first, second, third] == [0, 2, 4])
        #expect(recorder.sizes == [1, 2])
    }

    @Test("a batch holds at most its maximum; the rest go in the next")
    func atMostMaximum() async throws {
        let recorder = Recorder()
        let batcher = batcher(maxBatch: 2, recorder: recorder)
        async let first = batcher.submit(0)
        try await waitUntil { recorder.sizes == [1] }
        async let others = withThrowingTaskGroup(of: Int.self) { group in
            for request in 1...5 { group.addTask { try await batcher.submit(request) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        try await waitUntil { batcher.pendingCount == 5 }
        recorder.release()
        #expect(try await first == 0)
        #expect(try await others.sorted() == [2, 4, 6, 8, 10])
        #expect(recorder.sizes == [1, 2, 2, 1])
    }

    @Test(
        "while batches come fast, a request that finds the writer free waits its gathering for others",
        arguments: [1, 2])
    func gathering(slots: Int) async throws {
        let recorder = Recorder()
        // The gathering ends when the test says (a clock would make it a race on a starved machine); a batch ended
        // less than a minute ago counts as just now.
        let ended = AsyncStream<Void>.makeStream()
        let batcher = Batcher<Int, Int>(
            maxBatch: 256, maxConcurrent: slots, gather: .seconds(60),
            waitGathering: { _ in for await _ in ended.stream { break } }
        ) { requests in
            await recorder.ran(requests)
            return requests.map { $0 * 2 }
        }
        // No batch before it: the first goes alone and at once.
        #expect(try await batcher.submit(1) == 2)
        // One ended just now: the next to come waits, and those that come meanwhile go with it.
        async let second = batcher.submit(2)
        async let third = batcher.submit(3)
        async let fourth = batcher.submit(4)
        try await waitUntil { batcher.pendingCount == 3 || recorder.sizes.count > 1 }
        #expect(recorder.sizes == [1], "a request went before the gathering ended")
        ended.continuation.yield()
        #expect(try await [second, third, fourth] == [4, 6, 8])
        #expect(recorder.sizes == [1, 3])
    }

    private func waitUntil(_ condition: () -> Bool) async throws {
        while !condition() { try await Task.sleep(for: .milliseconds(1)) }
    }
}
