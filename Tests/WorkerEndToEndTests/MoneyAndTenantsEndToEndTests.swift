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
}
