import Foundation
import TestSupport
import Testing
import Vocabulary
import Configuration
import Flows

/// The PostgreSQL ledger failed over while it decides: a primary and a streaming standby of their own
/// (scripts/lib/pg-pair.sh: `pg_basebackup -R`), the worker on a multi-host URL, the primary crashed
/// (`pg_ctl stop -m immediate`) and the standby promoted (`pg_ctl promote`) during 5,000 jobs: 2,500 purchases,
/// each presented for two orders.
@Suite("The ledger failed over while it decides", .serialized, .timeLimit(.minutes(6)))
struct FailoverEndToEndTests {
    static let pairs = 2_500

    @Test(
        "synchronous replication: every job is answered once, no purchase is granted twice; the time to recover is printed"
    )
    func synchronous() async throws {
        let drill = try await Drill.run(mode: "sync")
        #expect(drill.unanswered == 0)
        #expect(drill.answeredTwoWays == 0, "jobs answered with two different events")
        #expect(drill.grantedTwice == 0, "purchases granted to two orders")
        #expect(drill.grantedOnce == Self.pairs, "each purchase granted to one of its orders")
        print("failover drill (synchronous): recovered in \(drill.recoverySeconds) s; \(drill.summary)")
    }

    @Test("asynchronous replication: what is lost is only what the standby had not received, and it shows")
    func asynchronous() async throws {
        let drill = try await Drill.run(mode: "async")
        #expect(drill.unanswered == 0)
        #expect(drill.answeredTwoWays == 0)
        // A purchase granted to two orders is one whose first claim the old primary committed and never
        // streamed: it is among the grants the new primary lacks, and nowhere else.
        #expect(drill.grantedTwiceTransactions.isSubset(of: drill.lostClaims), "\(drill.summary)")
        print(
            "failover drill (asynchronous): recovered in \(drill.recoverySeconds) s; \(drill.lostClaims.count) claim(s)"
                + " committed on the old primary were lost; \(drill.grantedTwice) purchase(s) granted twice; \(drill.summary)"
        )
    }
}

/// One drill: the pair started, the worker deciding, the primary crashed and the standby promoted a third of
/// the way through, every job waited for; then the old primary restarted alone to see what it held.
private struct Drill {
    var unanswered = 0
    var answeredTwoWays = 0
    var grantedOnce = 0
    var grantedTwice = 0
    var grantedTwiceTransactions: Set<String> = []
    var lostClaims: Set<String> = []
    var recoverySeconds = ""
    var summary = ""

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/lib/pg-pair.sh").path

    /// Runs pg-pair.sh with posix_spawn and waitpid (as runPsql does), its output to a file: the servers it
    /// starts would hold a pipe open.
    static func pair(_ arguments: [String]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pg-pair-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let quoted = ([script] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let status = runAndWait(["/bin/bash", "-c", "\(quoted) > '\(path)' < /dev/null"])
        guard status == 0 else {
            throw TestSupportError("pg-pair.sh \(arguments.joined(separator: " ")) exited \(status)")
        }
        let data = FileManager.default.contents(atPath: path) ?? Data()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func run(mode: String) async throws -> Drill {
        // Not in the run's TMPDIR (root's, mode 700 under the test command): the clusters belong to the postgres
        // user as root, and their socket path must stay short.
        let base = ProcessInfo.processInfo.environment["SERVICES_TMPDIR"] ?? "/tmp"
        let directory = "\(base)/pair-\(UUID().uuidString.prefix(8))"
        defer { _ = try? pair(["stop", directory]) }
        let ports = try pair(["start", directory, mode]).split(separator: " ").map(String.init)
        let primary = "postgresql://postgres@127.0.0.1:\(ports[0])"
        let standby = "postgresql://postgres@127.0.0.1:\(ports[1])"
        #expect(runPsql(primary + "/postgres", "CREATE DATABASE failover") == 0)
        let url =
            "postgresql://postgres@127.0.0.1:\(ports[0]),127.0.0.1:\(ports[1])/failover"
            + "?target_session_attrs=read-write&connect_timeout=2"
        let harness = try await WorkerHarness { $0.ledgerURL = url }
        var jobs: [(String, String, String)] = []  // (first job, second job, transaction)
        var proofs: [String] = []
        for index in 0..<FailoverEndToEndTests.pairs {
            let purchase = try await harness.purchase(["product_id": "coins.100"])
            jobs.append(("fo-\(index)-a", "fo-\(index)-b", purchase.transactionID))
            proofs.append(purchase.receipt)
        }
        // Submitted while the worker decides, 64 at a time, so the failover lands mid-flow.
        var submissions: [(key: String, value: Data)] = []
        for (index, pair) in jobs.enumerated() {
            for (id, side) in [(pair.0, "a"), (pair.1, "b")] {
                let body = job(id, order: "o-\(index)-\(side)", product: "coins.100", ["receipt": proofs[index]])
                submissions.append(("o-\(index)-\(side)", try JSONSerialization.data(withJSONObject: body)))
            }
        }
        let queued = submissions
        let submitting = Task {
            for start in stride(from: 0, to: queued.count, by: 64) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for item in queued[start..<min(start + 64, queued.count)] {
                        group.addTask { try await harness.submit(raw: item.value, key: item.key) }
                    }
                    try await group.waitForAll()
                }
            }
        }
        let ids = jobs.flatMap { [$0.0, $0.1] }
        func answered() -> [String] { ids.filter { !harness.resultMessages(jobID: $0).isEmpty } }
        _ = await eventually(timeout: .seconds(120), interval: .milliseconds(50)) { answered().count >= ids.count / 3 }
        let crashed = Date()
        _ = try pair(["crash-primary", directory])
        _ = try pair(["promote", directory])
        let promoted = Date()
        // Recovered: the first decision made after the promotion (its verified_at) reaches the results topic.
        let before = Set(answered())
        let waiting = ids.filter { !before.contains($0) }
        var recovered: Date?
        _ = await eventually(timeout: .seconds(120), interval: .milliseconds(20)) {
            for id in waiting where !harness.resultMessages(jobID: id).isEmpty {
                for event in harness.results(jobID: id) {
                    if let time = (event["verified_at"] as? String).flatMap(RFC3339.parse), time > promoted {
                        recovered = Date()
                        return true
                    }
                }
            }
            return false
        }
        try await submitting.value
        _ = await eventually(timeout: .seconds(180), interval: .milliseconds(200)) { answered().count == ids.count }
        await harness.stop()

        var drill = Drill()
        drill.recoverySeconds = recovered.map { String(format: "%.2f", $0.timeIntervalSince(crashed)) } ?? "never"
        for (first, second, transaction) in jobs {
            var grants = 0
            for id in [first, second] {
                let events = harness.results(jobID: id)
                if events.isEmpty { drill.unanswered += 1 }
                if Set(events.compactMap { $0["event_id"] as? String }).count > 1 { drill.answeredTwoWays += 1 }
                if events.contains(where: { $0["decision"] as? String == "grant" }) { grants += 1 }
            }
            if grants == 1 { drill.grantedOnce += 1 }
            if grants > 1 {
                drill.grantedTwice += 1
                drill.grantedTwiceTransactions.insert(transaction)
            }
        }
        // What the old primary held and the new one lacks: claims (a transaction granted to an order) lost with it.
        func claims(_ server: String) -> Set<String> {
            Set(
                psqlLines(server + "/failover", "SELECT transaction_id || ' ' || order_id FROM receipt_worker.grants")
                    ?? [])
        }
        let kept = claims(standby)
        _ = try pair(["restart-old", directory])
        let held = claims(primary)
        drill.lostClaims = Set(held.subtracting(kept).compactMap { $0.split(separator: " ").first.map(String.init) })
        drill.summary =
            "\(ids.count) jobs; the new primary holds \(kept.count) grants, the old one held \(held.count)"
        return drill
    }
}

private enum Timestamp {
    static func parse(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
