import Foundation
import Synchronization

/// A boolean that one thread sets and another reads; a class so escaping closures can share it.
final class AtomicFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

/// Writes one line to standard output at once (unbuffered), so a pipe or a terminal sees results as they come.
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Writes "receipt-worker: MESSAGE" to standard error: problems, never results.
func complain(_ message: String) {
    FileHandle.standardError.write(Data("receipt-worker: \(message)\n".utf8))
}
