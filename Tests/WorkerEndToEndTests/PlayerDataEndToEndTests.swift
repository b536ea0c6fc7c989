import Foundation
import Ledger
import LedgerDomain
import ReceiptWorker
import TestSupport
import Testing

/// A player's data request end to end on each ledger: the worker grants, denies and revokes through a real broker
/// and the simulator over HTTP, support credits and looks up with the binary, then `receipt-worker player export`
/// prints everything the ledger holds about the player, and nothing of anyone else's.
@Suite("A player's data exported, on SQLite and PostgreSQL", .timeLimit(.minutes(3)))
struct PlayerDataEndToEndTests {
    @Test(
        "a player with a grant refunded, a subscription, a denial, a support credit and audit lines: all of it in one document, by player or by order; another player's nothing; the export audited without the data",
        arguments: LedgerKind.allCases)
    func export(kind: LedgerKind) async throws {
        let harness = try await WorkerHarness.on(kind)
        let gems = try await harness.purchase(["product_id": "gems_500", "app_account_token": UUID().uuidString])
        try await harness.submit(
            job("job-gems", order: "order-gems", product: "gems_500", ["signed_transaction": gems.signedTransaction]))
        #expect(await harness.result(jobID: "job-gems")?["decision"] as? String == "grant")
        let vip = try await harness.purchase(["product_id": "vip_monthly", "type": "subscription"])
        try await harness.submit(
            job("job-vip", order: "order-vip", product: "vip_monthly", ["signed_transaction": vip.signedTransaction]))
        // The same purchase presented for another order: denied, and the answer names the player.
        try await harness.submit(
            job("job-again", order: "order-again", product: "gems_500", ["signed_transaction": gems.signedTransaction])
        )
        var other = job("job-other", order: "order-other", product: "gems_500", [:])
        let stranger = try await harness.purchase(["product_id": "gems_500"])
        other["user_id"] = "player-2"
        other["signed_transaction"] = stranger.signedTransaction
        try await harness.submit(other)
        for id in ["job-gems", "job-vip", "job-again", "job-other"] { _ = await harness.result(jobID: id) }
        _ = try await harness.admin.call("refund", ["transaction_id": gems.transactionID])
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.events(orderID: "order-gems").contains { $0["type"] as? String == "receipt.revoked" }
            })
        // Apple reports two purchases with the player's token: one a job of theirs claims, one no job claims yet.
        let token = UUID().uuidString.lowercased()
        let reported = try await harness.purchase(["product_id": "gems_50", "app_account_token": token, "notify": true])
        let waiting = try await harness.purchase(["product_id": "gems_50", "app_account_token": token, "notify": true])
        // Both reported purchases wait in the ledger before the job claims the first (a claim first would leave
        // Apple's report nothing to wait for).
        #expect(await harness.reportsWaiting(token: token, count: 2))
        try await harness.submit(
            job(
                "job-reported", order: "order-reported", product: "gems_50",
                [
                    "signed_transaction": reported.signedTransaction
                ]))
        #expect(await harness.result(jobID: "job-reported")?["decision"] as? String == "grant")
        let unheld = try await harness.admin.call("purchases", ["product_id": "gems_100"])
        let credited = try await harness.supportTool([
            "credit", "--transaction-id", try #require(unheld["transaction_id"] as? String), "--user-id", "player-1",
            "--order-id", "order-credit", "--by", "support-ana", "--reason", "never arrived",
            "--apple-order-id", try #require(unheld["order_id"] as? String),
        ])
        #expect(credited.status == 0, "\(credited.errors)")
        let looked = try await harness.supportTool(["lookup", "--user-id", "player-1", "--by", "support-ana"])
        #expect(looked.status == 0, "\(looked.errors)")

        let exported = try await harness.supportTool([
            "player", "export", "--user-id", "player-1", "--by", "support-lou", "--ticket", "GDPR-1",
        ])
        #expect(exported.status == 0, "\(exported.errors)")
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(exported.output.utf8)) as? [String: Any])
        #expect(document["user_id"] as? String == "player-1" && document["truncated"] as? Bool == false)
        let grants = try #require(document["grants"] as? [[String: Any]])
        #expect(
            Set(grants.compactMap { $0["order_id"] as? String })
                == ["order-gems", "order-vip", "order-credit", "order-reported"])
        let purchasesReported = try #require(document["reported_purchases"] as? [[String: Any]])
        #expect(
            purchasesReported.compactMap { $0["transaction_id"] as? String } == [reported.transactionID],
            "the player's purchase Apple reported; not another reported with the same token, which no job claimed")
        #expect(!exported.output.contains(waiting.transactionID))
        let notices = try #require(document["notices"] as? [[String: Any]])
        #expect(
            notices.compactMap { ($0["event"] as? [String: Any])?["type"] as? String } == ["receipt.revoked"],
            "the refund's event")
        #expect(grants.first { $0["order_id"] as? String == "order-credit" }?["credit"] as? String == "job")
        let refunds = try #require(document["refunds"] as? [[String: Any]])
        #expect(refunds.map { $0["transaction_id"] as? String } == [gems.transactionID])
        #expect(refunds.first?["revoked"] as? Bool == true)
        let subscriptions = try #require(document["subscriptions"] as? [[String: Any]])
        #expect(subscriptions.map { $0["original_transaction_id"] as? String } == [vip.transactionID])
        let answers = try #require(document["answers"] as? [[String: Any]])
        let creditID = "support:" + (try #require(unheld["transaction_id"] as? String))
        #expect(
            Set(answers.compactMap { $0["job_id"] as? String }) == [
                "job-gems", "job-vip", "job-again", "job-reported", creditID,
            ],
            "the jobs' answers and support's credit")
        let denial = answers.first { $0["job_id"] as? String == "job-again" }?["event"] as? [String: Any]
        #expect(denial?["reason"] as? String == "duplicate_transaction")
        let audit = try #require(document["audit"] as? [[String: Any]])
        #expect(audit.map { $0["action"] as? String } == ["lookup", "credit"], "newest first")
        #expect(
            audit.allSatisfy { $0["agent"] == nil && $0["agent_name"] == nil },
            "not who: staff are not the player's data")
        #expect(!exported.output.contains("player-2") && !exported.output.contains(stranger.transactionID))

        // By one of the player's orders: the same player; an order the ledger never granted: exit 3.
        let byOrder = try await harness.supportTool([
            "player", "export", "--order-id", "order-vip", "--by", "support-lou",
        ])
        #expect(byOrder.status == 0 && byOrder.output.contains("\"user_id\":\"player-1\""), "\(byOrder.errors)")
        let byToken = try await harness.supportTool([
            "player", "export", "--app-account-token", token, "--by", "support-lou",
        ])
        #expect(byToken.status == 0 && byToken.output.contains("\"user_id\":\"player-1\""), "\(byToken.errors)")
        let none = try await harness.supportTool(["player", "export", "--order-id", "order-nobody", "--by", "lou"])
        #expect(none.status == 3, "\(none.output)")

        let lines = try await harness.configuration.withToolLedger { ledger in
            try await ledger.audit(AuditFilter(action: "export", limit: 10))
        }
        #expect(lines.map(\.outcome) == ["not_found", "exported", "exported", "exported"])
        let first = try #require(lines.last)
        #expect(first.player == "player-1" && first.ticket == "GDPR-1" && first.agent == "cli:support-lou")
        #expect(first.answer.contains("\"grants\":4") && !first.answer.contains("order-gems"), "\(first.answer)")
        await harness.stop()
    }
}
