import Foundation
import Observability
import Synchronization
import Testing

@Suite("Threads named where operators look")
struct NamedThreadTests {
    /// The name the kernel gives the thread that reads it, as `top -H` and perf show it.
    private static func kernelName() -> String {
        let text = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
        return text.trimmingCharacters(in: .newlines)
    }

    /// Starts a named thread and returns the name the kernel shows for it.
    private func nameSeen(starting name: String) -> String {
        let seen = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        NamedThread.start(name) {
            seen.withLock { $0 = Self.kernelName() }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        return seen.withLock { $0 } ?? ""
    }

    @Test("the kernel shows a thread under its name, not the dispatch thread's it was started from")
    func namedForTheKernel() {
        #expect(nameSeen(starting: "ledger-sqlite") == "ledger-sqlite")
        #expect(nameSeen(starting: "http-client") == "http-client")
    }

    @Test("a name past the 15 bytes Linux keeps is cut, not refused")
    func longNameCut() {
        #expect(nameSeen(starting: "kafka-consumer-poll") == "kafka-consumer-")
    }
}
