import Dispatch

/// Runs blocking C calls (a synchronous commit, a flush, a close) on a thread of their own, never on
/// Swift's cooperative pool, whose few threads every task shares.
enum Blocking {
    private static let queue = DispatchQueue(label: "kafka.blocking", attributes: .concurrent)

    static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }
}
