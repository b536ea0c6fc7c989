import Foundation
import Ledger

// The SQLite ledger alone, as the worker drives it: each job looks its decision up, then records a grant with
// its event, 1,000 jobs in flight. Prints the CPU (user and system) and the bytes written per decision, the
// part of a job's CPU the ledger takes inside the worker, without the broker's and the simulator's noise
// around it.
//   ledger-bench [--decisions N] [--prefill N] [--in-flight N]       (a ledger file of its own, in TMPDIR)
// --prefill records N decisions first (not measured), as a ledger that has run for a while holds.
// scripts/bench-ledger.sh runs it and prints the same machine's ECDSA cost beside it.

func option(_ name: String, default value: Int) -> Int {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count,
        let parsed = Int(arguments[index + 1]), parsed >= 0
    else { return value }
    return parsed
}

/// User and system CPU of this process so far, in microseconds.
func cpuMicroseconds() -> (user: Double, system: Double) {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func micros(_ time: timeval) -> Double { Double(time.tv_sec) * 1e6 + Double(time.tv_usec) }
    return (micros(usage.ru_utime), micros(usage.ru_stime))
}

/// Bytes this process asked the kernel to write so far (`wchar` of /proc/self/io).
func bytesWritten() -> Double {
    guard let text = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8) else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix("wchar:") {
        return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces)) ?? 0
    }
    return 0
}

/// A UUID-shaped id, unique per run and index. Not `UUID()`: Foundation opens /dev/urandom for each one on
/// Linux, which cost more than the ledger's own work here (the worker makes none per job).
func identifier(_ index: Int, _ kind: Int, run: String) -> String {
    let hex = String(UInt64(bitPattern: Int64(index &* 2_654_435_761 &+ kind)), radix: 16)
    return runPrefix + run + "-" + String(repeating: "0", count: max(0, 16 - hex.count)) + hex
}
let runPrefix = UUID().uuidString.lowercased().prefix(18)

/// A granted signed-transaction job's decision, with an event the size of a real `receipt.granted`.
func decision(_ index: Int, run: String) -> Decision {
    let jobID = identifier(index, 1, run: run)
    let orderID = "ord-\(runPrefix)\(run)-\(index)"
    // Apple's transaction ids are increasing decimal numbers, not random ones.
    let transactionID = String(2_000_000_000_000_000 + index) + runPrefix + run
    let json = """
        {"event_id":"\(identifier(index, 2, run: run))","type":"receipt.granted","job_id":"\(jobID)",\
        "order_id":"\(orderID)","user_id":"player-\(index % 100_000)","decision":"grant","reason":"verified",\
        "product_id":"coins_100","quantity":1,"transaction_id":"\(transactionID)",\
        "original_transaction_id":"\(transactionID)","environment":"Production","bundle_id":"com.example.game",\
        "purchase_date":"2026-11-30T17:25:58.000Z","expires_date":null,"verified_at":"2026-11-30T17:26:36.233Z",\
        "attempts":1,"detail":null}
        """
    let fingerprint = String(repeating: String(index, radix: 16), count: 64).prefix(64)
    return Decision(
        key: DecisionKey(app: .defaultApp, jobID: jobID, fingerprint: String(fingerprint)),
        grant: GrantClaim(
            orderID: orderID, transactionID: transactionID, userID: "player-\(index % 100_000)",
            productID: "coins_100", quantity: 1, originalTransactionID: transactionID),
        event: StoredEvent(
            eventID: identifier(index, 2, run: run), type: "receipt.granted", time: "2026-11-30T17:26:36.233Z",
            key: orderID, json: Array(json.utf8)))
}

/// Runs the decisions, `inFlight` at a time, each a lookup then a record, as the worker does.
func run(_ ledger: LedgerEngine, _ decisions: [Decision], inFlight: Int) async throws {
    let next = Counter()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<inFlight {
            group.addTask {
                while let index = next.take(below: decisions.count) {
                    let decision = decisions[index]
                    _ = try await ledger.storedDecision(decision.key)
                    guard case .recorded = try await ledger.record(decision) else {
                        fatalError("decision \(index) was not recorded")
                    }
                }
            }
        }
        try await group.waitForAll()
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func take(below limit: Int) -> Int? {
        lock.lock()
        defer { lock.unlock() }
        guard value < limit else { return nil }
        value += 1
        return value - 1
    }
}

let count = option("--decisions", default: 50_000)
let prefill = option("--prefill", default: 0)
let inFlight = max(1, option("--in-flight", default: 1_000))
// A file of its own, never one given: the bench writes made-up grants and deletes the file after.
let path = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-bench-\(UUID()).sqlite").path

let ledger = try LedgerEngine.sqlite(path: path)
if prefill > 0 { try await run(ledger, (0..<prefill).map { decision($0, run: "p") }, inFlight: inFlight) }
// Made before the measured window: what is measured is the ledger's work, not the making of its input.
let measured = (0..<count).map { decision($0, run: "m") }
let (cpuBefore, writtenBefore, started) = (cpuMicroseconds(), bytesWritten(), Date())
try await run(ledger, measured, inFlight: inFlight)
let (cpuAfter, writtenAfter, seconds) = (cpuMicroseconds(), bytesWritten(), Date().timeIntervalSince(started))
await ledger.close()
for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }

let user = (cpuAfter.user - cpuBefore.user) / Double(count)
let system = (cpuAfter.system - cpuBefore.system) / Double(count)
print(
    String(
        format: "SQLite ledger: %d decisions after %d, %d in flight: %.0f decisions/s; CPU per decision %.1f us"
            + " (user %.1f, system %.1f); %.1f KiB written per decision",
        count, prefill, inFlight, Double(count) / seconds, user + system, user, system,
        (writtenAfter - writtenBefore) / Double(count) / 1024))
