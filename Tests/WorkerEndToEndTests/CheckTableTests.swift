import Foundation
import Testing
import TestSupport

/// The check table's rules are tested once, in `JobHandlerTests` (every row, in memory, in milliseconds). What
/// stays end to end is what only the wire shows: the deny reasons decided by what Apple's answers say (its status
/// for a receipt it cannot read, its bundle id, its cancellation and expiry fields), through the simulator over
/// HTTP, in one worker.
@Suite("The check table's rows that Apple's answers decide, end to end", .timeLimit(.minutes(3)))
struct CheckTableTests {
    @Test("a receipt Apple cannot read, another app's, a refunded one and an expired subscription: each its reason")
    func rowsFromApple() async throws {
        let harness = try await WorkerHarness()
        try await harness.submit(job("invalid", order: "o1", product: "p", ["receipt": "bm9wZQ=="]))
        let other = try await harness.purchase(["product_id": "p", "bundle_id": "com.other.game"])
        try await harness.submit(job("bundle", order: "o2", product: "p", ["receipt": other.receipt]))
        let refunded = try await harness.purchase(["product_id": "p"])
        try await harness.admin.refund(transactionID: refunded.transactionID)
        try await harness.submit(job("refunded", order: "o3", product: "p", ["receipt": refunded.receipt]))
        let lapsed = try await harness.purchase([
            "product_id": "p", "type": "subscription", "expires_in_seconds": -60,
        ])
        try await harness.submit(job("lapsed", order: "o4", product: "p", ["receipt": lapsed.receipt]))
        for (jobID, reason) in [
            ("invalid", "invalid_receipt"), ("bundle", "bundle_mismatch"), ("refunded", "revoked"),
            ("lapsed", "expired"),
        ] {
            let event = await harness.result(jobID: jobID)
            #expect(event?["decision"] as? String == "deny", "\(jobID)")
            #expect(event?["reason"] as? String == reason, "\(jobID): \(event ?? [:])")
            #expect(event?["detail"] is String)
        }
        await harness.stop()
    }

    @Test("a bare transaction id without the order's app_account_token is malformed_job, without a call to Apple")
    func bareTransactionID() async throws {
        let harness = try await WorkerHarness()
        let purchase = try await harness.purchase(["product_id": "p"])
        try await harness.submit(job("j", order: "o", product: "p", ["transaction_id": purchase.transactionID]))
        let event = await harness.result(jobID: "j")
        #expect(event?["reason"] as? String == "malformed_job")
        #expect((event?["detail"] as? String)?.contains("app_account_token") == true)
        #expect(event?["attempts"] as? Int == 0)
        await harness.stop()
    }
}
