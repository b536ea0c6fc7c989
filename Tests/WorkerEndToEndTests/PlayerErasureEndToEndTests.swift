import Crypto
import Foundation
import LedgerDomain
import ReceiptWorker
import TestSupport
import Testing

/// A player erased end to end on each ledger: the worker grants, denies and revokes through a real broker and the
/// simulator over HTTP, support credits and looks up with the binary, then `receipt-worker player erase` (the
/// binary) rewrites the ledger: nothing of the player's identifiers left in any text column, the purchase replayed
/// still a duplicate, `player.erased` published once, and an erasure cut short by a broker that did not take its
/// event finished by the same command.
@Suite("A player erased, on SQLite and PostgreSQL", .timeLimit(.minutes(4)))
struct PlayerErasureEndToEndTests {
    @Test(
        "a player's identifiers gone from every text column, the claims kept: the purchase replayed is a duplicate, another player untouched, player.erased published once though the first run's broker failed, the same pseudonym each time",
        arguments: LedgerKind.allCases)
    func erase(kind: LedgerKind) async throws {
        let harness = try await WorkerHarness.on(kind)
        let url = kind == .postgresql ? harness.configuration.ledgerURL : nil
        let token = UUID().uuidString.lowercased()
        let gems = try await harness.purchase(["product_id": "gems_500", "app_account_token": token, "notify": true])
        #expect(await harness.reportsWaiting(token: token, count: 1))
        try await harness.submit(
            job("job-gems", order: "order-gems", product: "gems_500", ["signed_transaction": gems.signedTransaction]))
        #expect(await harness.result(jobID: "job-gems")?["decision"] as? String == "grant")
        try await harness.submit(
            job("job-again", order: "order-again", product: "gems_500", ["signed_transaction": gems.signedTransaction])
        )
        #expect(await harness.result(jobID: "job-again")?["reason"] as? String == "duplicate_transaction")
        _ = try await harness.admin.call("refund", ["transaction_id": gems.transactionID, "percentage": 50])
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.events(orderID: "order-gems").contains { $0["type"] as? String == "receipt.revoked" }
            })
        let unheld = try await harness.admin.call("purchases", ["product_id": "gems_100"])
        let credited = try await harness.supportTool([
            "credit", "--transaction-id", try #require(unheld["transaction_id"] as? String), "--user-id", "player-1",
            "--order-id", "order/credit", "--by", "support-ana", "--reason", "player-1 says order-gems never came",
            "--apple-order-id", try #require(unheld["order_id"] as? String), "--app-account-token", token,
        ])
        #expect(credited.status == 0, "\(credited.errors)")
        // Looked up by its transaction, and by the credit's order (with a `/`, which JSON may write `\/`): audit
        // lines about no player, found by what they name.
        #expect(
            try await harness.supportTool(["lookup", "--order-id", "order/credit", "--by", "support-ana"]).status == 0)
        #expect(
            try await harness.supportTool(["lookup", "--transaction-id", gems.transactionID, "--by", "support-ana"])
                .status == 0)
        // The app named by its bundle id, as an operator may: audited under the app's name, found by the erasure.
        #expect(
            try await harness.supportTool([
                "lookup", "--user-id", "player-1", "--app", "com.example", "--by", "support-ana",
            ]).status == 0)
        let stranger = try await harness.purchase(["product_id": "gems_500"])
        var other = job("job-other", order: "order-other", product: "gems_500", [:])
        other["user_id"] = "player-2"
        other["signed_transaction"] = stranger.signedTransaction
        try await harness.submit(other)
        #expect(await harness.result(jobID: "job-other")?["decision"] as? String == "grant")

        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("erasure-\(UUID()).key")
        try Data((0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined().utf8)
            .write(to: keyFile)
        func erase(_ extra: [String] = [], overriding: [String] = []) async throws -> CommandLineRun {
            try await harness.supportTool(
                ["player", "erase", "--user-id", "player-1", "--by", "support-lou", "--ticket", "GDPR-9"] + extra,
                overriding: ["privacy.erasure_key_file=\(keyFile.path)"] + overriding)
        }
        let identifiers = [
            "player-1", "order-gems", "order-again", "order/credit", "job-gems", "job-again", token,
            SHA256Digest.hex(Array(token.utf8)), "player-1 says",
        ]
        // A player the ledger knows nothing of: refused, nothing recorded, no event.
        let nobody = try await harness.supportTool(
            ["player", "erase", "--user-id", "player-nobody", "--by", "support-lou"],
            overriding: ["privacy.erasure_key_file=\(keyFile.path)"])
        #expect(nobody.status == 3 && nobody.errors.contains("holds nothing about this player"), "\(nobody.errors)")

        // The player asks for their data first: exported whole.
        func exported(_ user: String) async throws -> [String: Any] {
            let run = try await harness.supportTool(["player", "export", "--user-id", user, "--by", "support-lou"])
            #expect(run.status == 0, "\(run.errors)")
            return try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any])
        }
        let before = try await exported("player-1")
        #expect(
            Set(((before["grants"] as? [[String: Any]]) ?? []).compactMap { $0["order_id"] as? String })
                == ["order-gems", "order/credit"])
        #expect(((before["audit"] as? [[String: Any]]) ?? []).count >= 2)

        let dry = try await erase(["--dry-run"])
        #expect(dry.status == 0 && dry.output.hasPrefix("dry run: would rewrite"), "\(dry.output) \(dry.errors)")
        let pseudonym = try #require(dry.output.firstMatch(of: /erased-[0-9a-f]{24}/).map { String($0.0) })
        #expect(!(try await ledgerTexts(harness, url: url, naming: identifiers)).isEmpty, "a dry run changes nothing")

        // The broker does not take the event: erased, the event left to publish.
        let cut = try await erase(overriding: ["kafka.bootstrap.servers=127.0.0.1:1", "kafka.message.timeout.ms=2000"])
        #expect(cut.status == 1 && cut.errors.contains("run the same command again"), "\(cut.output) \(cut.errors)")
        let left = try await ledgerTexts(harness, url: url, naming: identifiers)
        #expect(left == [], "nothing of the player left")
        #expect(harness.resultEvents(type: "player.erased").isEmpty)

        // Nothing of the player under their id; their purchases under the pseudonym, with nothing that names them.
        let after = try await exported("player-1")
        #expect(
            ((after["grants"] as? [[String: Any]]) ?? []).isEmpty
                && ((after["audit"] as? [[String: Any]]) ?? []).isEmpty)
        let kept = try await exported(pseudonym)
        #expect(((kept["grants"] as? [[String: Any]]) ?? []).count == 2, "the claims kept, under the pseudonym")
        let keptText = String(decoding: try JSONSerialization.data(withJSONObject: kept), as: UTF8.self)
        #expect(!identifiers.contains { keptText.contains($0) }, "\(keptText)")

        let finished = try await erase()
        #expect(finished.status == 0 && finished.output.contains(pseudonym), "\(finished.output) \(finished.errors)")
        let again = try await erase()
        #expect(again.status == 0 && again.output.hasPrefix("erased before: the player is \(pseudonym)"))
        #expect(await eventually { !harness.resultEvents(type: "player.erased").isEmpty })
        try await Task.sleep(for: .seconds(1))
        let events = harness.resultEvents(type: "player.erased")
        #expect(events.count == 1, "published once")
        #expect(events.first?["user_id"] as? String == "player-1" && events.first?["pseudonym"] as? String == pseudonym)

        // The claims stay: the purchase support credited, replayed for another order, is still the one granted; the
        // one refunded in part is still refunded.
        try await harness.submit(
            job(
                "job-replay", order: "order-new", product: "gems_100",
                ["signed_transaction": try #require(unheld["signed_transaction"] as? String)]))
        #expect(await harness.result(jobID: "job-replay")?["reason"] as? String == "duplicate_transaction")
        try await harness.submit(
            job(
                "job-refunded", order: "order-new-2", product: "gems_500",
                ["signed_transaction": gems.signedTransaction]))
        #expect(await harness.result(jobID: "job-refunded")?["reason"] as? String == "revoked")
        let others = try await ledgerTexts(harness, url: url, naming: ["player-2", "order-other"])
        #expect(others.contains { $0.hasPrefix("grants") }, "another player's grant untouched: \(others)")
        let audit = try await harness.supportTool(["ledger", "audit", "--json"])
        #expect(audit.output.contains("\"action\":\"erase\"") && audit.output.contains(pseudonym))
        await harness.stop()
    }

    /// `table: needle` (`table.column: needle` on SQLite) for every text the ledger holds that contains one of
    /// `needles`. Two processes at most (psql, or Python's sqlite3), started as the binaries under test are.
    func ledgerTexts(_ harness: WorkerHarness, url: String?, naming needles: [String]) async throws -> [String] {
        if let url {
            let psql = ["-qtAX", "-v", "ON_ERROR_STOP=1", "-c"]
            let tables = try await CommandLineRun.run(
                [url] + psql + [
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'receipt_worker'"
                ],
                executable: "/usr/bin/psql"
            ).output.split(separator: "\n").map(String.init)
            let literals = needles.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" }.joined(
                separator: ", ")
            let scans = tables.map { table in
                "SELECT '\(table): ' || n FROM receipt_worker.\(table) t, unnest(ARRAY[\(literals)]) n"
                    + " WHERE strpos(t::text, n) > 0"
            }
            guard !scans.isEmpty else { return ["no tables"] }
            let found = try await CommandLineRun.run(
                [url] + psql + ["SELECT DISTINCT * FROM (" + scans.joined(separator: " UNION ALL ") + ") s"],
                executable: "/usr/bin/psql")
            return found.output.split(separator: "\n").map(String.init)
        }
        let path = String(harness.configuration.ledgerURL.dropFirst("sqlite:".count))
        let script = """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
                columns = [c[1] for c in db.execute(f'PRAGMA table_info("{table}")')]
                for row in db.execute(f'SELECT * FROM "{table}"'):
                    for column, value in zip(columns, row):
                        text = value.decode('utf-8', 'replace') if isinstance(value, bytes) else str(value)
                        for needle in sys.argv[2:]:
                            if needle in text:
                                print(f"{table}.{column}: {needle}")
            """
        let python = MetricsEndpointTests.repositoryRoot.appendingPathComponent(".deps/venv/bin/python").path
        let run = try await CommandLineRun.run(["-c", script, path] + needles, executable: python)
        return run.output.split(separator: "\n").map(String.init)
    }
}
