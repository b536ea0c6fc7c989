import Synchronization

/// A bound on a wait that a person is waiting on (a command): the first of the work's answer and the deadline.
package enum Deadline {
    /// `work`'s result, or `late` thrown once `duration` passed. The work is not waited for past the deadline: it
    /// goes on (a call blocked in a C library cannot be interrupted) and its result is dropped, so this is for a
    /// command that exits after, not for a long-running process.
    package static func within<T: Sendable>(
        _ duration: Duration, else late: any Error & Sendable, _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let first = FirstAnswer(continuation)
            let worker = Task {
                do { first.resume(.success(try await work())) } catch { first.resume(.failure(error)) }
            }
            Task {
                try? await Task.sleep(for: duration)
                worker.cancel()
                first.resume(.failure(late))
            }
        }
    }

    /// Resumes its continuation once: with the first answer.
    private final class FirstAnswer<T: Sendable>: Sendable {
        private let continuation: CheckedContinuation<T, any Error>
        private let answered = Mutex(false)

        init(_ continuation: CheckedContinuation<T, any Error>) { self.continuation = continuation }

        func resume(_ result: Result<T, any Error>) {
            let isFirst = answered.withLock { done in
                defer { done = true }
                return !done
            }
            if isFirst { continuation.resume(with: result) }
        }
    }
}
