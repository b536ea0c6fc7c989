import Dispatch

extension DispatchQueue {
    /// Runs a blocking database call on this queue, off Swift's cooperative pool, and returns its result.
    func perform<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            async { continuation.resume(with: Result { try body() }) }
        }
    }
}
