import Foundation
import Ledger
import Testing
import TestSupport
import Configuration
import Messaging

/// A COMMIT whose connection is cut mid-way: the server commits the batch, the worker never hears back
/// (scripts/lib/cut-commit-proxy.py stands between them and cuts the first five such connections). The batch
/// is retried on a new connection, where the ledger already holds its decisions: they are answered from it.
@Suite("A COMMIT cut mid-way", .timeLimit(.minutes(3)))
struct CommitCutEndToEndTests {
    @Test(
        "the first five COMMITs cut after the server has them: no purchase granted twice, no decision lost, every job answered with one event"
    )
    func commitCut() async throws {
        let direct = try makePostgresDatabase()
        // Migrated straight to the server, as the migration Job would: the proxy is for the worker's batches.
        await (try LedgerFactory.open(url: direct, poolSize: 1, defaultBundleID: "com.example")).close()
        let proxy = try CutProxy(databaseURL: direct, cuts: 5)
        defer { proxy.stop() }
        let harness = try await WorkerHarness { $0.ledgerURL = proxy.url }
        var pairs: [(String, String)] = []
        for index in 0..<100 {
            let purchase = try await harness.purchase(["product_id": "coins.100"])
            pairs.append(("cut-\(index)-a", "cut-\(index)-b"))
            for side in ["a", "b"] {
                try await harness.submit(
                    job(
                        "cut-\(index)-\(side)", order: "o-\(index)-\(side)", product: "coins.100",
                        ["receipt": purchase.receipt]))
            }
        }
        let ids = pairs.flatMap { [$0.0, $0.1] }
        #expect(
            await eventually(timeout: .seconds(120)) { ids.allSatisfy { !harness.resultMessages(jobID: $0).isEmpty } })
        await harness.stop()
        #expect(proxy.cutSoFar == 5, "COMMITs cut: \(proxy.cutSoFar)")
        for (first, second) in pairs {
            for id in [first, second] {
                #expect(Set(harness.results(jobID: id).compactMap { $0["event_id"] as? String }).count == 1, "\(id)")
            }
            let granted = [first, second].filter { id in
                harness.results(jobID: id).contains { $0["decision"] as? String == "grant" }
            }
            #expect(granted.count == 1, "\(first): granted \(granted.count) times")
        }
        #expect(psqlValue(direct, "SELECT count(*) FROM receipt_worker.grants") == "100")
    }
}

/// The proxy process, on a free port in front of the test's PostgreSQL.
private final class CutProxy: @unchecked Sendable {
    let url: String
    private let pid: pid_t
    private let status: String

    init(databaseURL: String, cuts: Int) throws {
        let withoutDatabase = String(databaseURL[..<databaseURL.lastIndex(of: "/")!])
        let database = String(databaseURL[databaseURL.index(after: databaseURL.lastIndex(of: "/")!)...])
        let port = String(withoutDatabase[withoutDatabase.index(after: withoutDatabase.lastIndex(of: ":")!)...])
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/lib/cut-commit-proxy.py").path
        let directory = FileManager.default.temporaryDirectory.path
        let output = "\(directory)/cut-proxy-\(UUID().uuidString).out"
        status = "\(directory)/cut-proxy-\(UUID().uuidString).status"
        let command = "exec python3 '\(script)' \(port) \(cuts) '\(status)' > '\(output)' < /dev/null"
        guard let spawned = spawn(["/bin/bash", "-c", command]) else {
            throw TestSupportError("cannot start cut-commit-proxy.py")
        }
        pid = spawned
        var listening: String?
        for _ in 0..<400 where listening == nil {  // processes start slowly beside other tests
            usleep(25_000)
            listening = (try? String(contentsOfFile: output, encoding: .utf8))?.split(separator: "\n").first.map(
                String.init)
        }
        guard let listening else { throw TestSupportError("cut-commit-proxy.py did not start") }
        url = "postgresql://postgres@127.0.0.1:\(listening)/\(database)?sslmode=disable"
    }

    var cutSoFar: Int {
        Int(
            (try? String(contentsOfFile: status, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
                ?? "")
            ?? -1
    }

    func stop() {
        // SIGKILL: a process spawned from a thread of Swift's pool inherits its blocked signals, SIGTERM among
        // them; the proxy holds nothing to flush.
        kill(pid, SIGKILL)
        var code: Int32 = 0
        waitpid(pid, &code, 0)
    }
}
