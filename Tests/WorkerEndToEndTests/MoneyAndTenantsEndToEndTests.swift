import AppStoreSimulator
import Foundation
import HTTPClient
import Kafka
import ReceiptWorker
import TestSupport
import Testing

/// Where money leaked, and where one game held up another, reproduced with the real parts (issue 32): the
/// simulator over HTTP, a broker, the worker. Each test has the honest case beside the hostile one.
@Suite("Money and tenants: what was lost, end to end", .timeLimit(.minutes(3)))
struct MoneyAndTenantsEndToEndTests {
    @Test(
        "Apple's bad minute (verifyReceipt answering 21002 for 3 s) denies nobody who paid: the genuine receipt is granted after it; a garbage receipt is still denied invalid_receipt"
    )
    func status21002() async throws {
        let harness = try await WorkerHarness(maxAttempts: 20) {
            $0.retry.initialBackoff = .milliseconds(200)
            $0.retry.maxBackoff = .seconds(2)
            $0.apple.malformedReceiptCalls = 3
        }
        // The worker in its group and answering first: the outage must meet the job.
        let warmUp = try await harness.purchase(["product_id": "coins_100"])
        try await harness.submit(job("warm-up", order: "o-warm-up", product: "coins_100", ["receipt": warmUp.receipt]))
        #expect(await harness.result(jobID: "warm-up")?["decision"] as? String == "grant")
        let purchase = try await harness.purchase(["product_id": "coins_100"])
        try await harness.faults(["outage_start_in_ms": 0, "outage_seconds": 3, "outage_mode": "status_21002"])
        try await harness.submit(
            job("genuine", order: "o-genuine", product: "coins_100", ["receipt": purchase.receipt]))
        try await harness.submit(
            job(
                "garbage", order: "o-garbage", product: "coins_100",
                ["receipt": Data("forged".utf8).base64EncodedString()])
        )
        let granted = try #require(await harness.result(jobID: "genuine"))
        #expect(granted["decision"] as? String == "grant", "\(granted)")
        #expect((granted["attempts"] as? Int ?? 0) > 1, "asked again after 21002")
        let denied = try #require(await harness.result(jobID: "garbage"))
        #expect(denied["decision"] as? String == "deny" && denied["reason"] as? String == "invalid_receipt")
        #expect(denied["attempts"] as? Int == 3, "\(denied)")
        #expect(harness.deadLetters.isEmpty)
        await harness.stop()
    }

    @Test(
        "a family member's renewal (FAMILY_SHARED) that no job claims is never credited by receipt.unclaimed; the purchaser's own renewal beside it is"
    )
    func familyRenewal() async throws {
        let harness = try await WorkerHarness(notifications: true) { $0.unclaimedAfter = .seconds(1) }
        let family = try await harness.purchase(
            ["product_id": "vip_monthly", "type": "subscription", "family_shared": true])
        let familyRenewal = try await harness.admin.call("renew", ["transaction_id": family.transactionID])
        let own = try await harness.purchase(["product_id": "vip_monthly", "type": "subscription"])
        let ownRenewal = try await harness.admin.call("renew", ["transaction_id": own.transactionID])
        let ownID = try #require(ownRenewal["transaction_id"] as? String)
        let familyID = try #require(familyRenewal["transaction_id"] as? String)
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.events(orderID: "unclaimed:\(ownID)").contains { $0["type"] as? String == "receipt.unclaimed" }
            }, "the purchaser's renewal no job claimed is credited")
        // Both renewals processed, and both due: the family member's is not credited.
        #expect(
            await eventually(timeout: .seconds(30)) {
                harness.worker.metrics.registry.render().split(separator: "\n").filter {
                    $0.hasPrefix("receipt_worker_notifications_processed_total") && $0.contains("DID_RENEW")
                }.compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +) == 2
            })
        try await Task.sleep(for: .seconds(2))
        #expect(harness.events(orderID: "unclaimed:\(familyID)").isEmpty)
        await harness.stop()
    }
}
