import Foundation
import Testing

@Suite("Every row of the contract's check table, end to end", .timeLimit(.minutes(3)))
struct CheckTableTests {
    enum Row: String, CaseIterable, Sendable {
        case invalidReceipt = "invalid_receipt", bundleMismatch = "bundle_mismatch"
        case transactionNotFound = "transaction_not_found", quantityMismatch = "quantity_mismatch"
        case accountMismatch = "account_mismatch", revoked, expired, orderAlreadyFulfilled = "order_already_fulfilled"
    }

    @Test("the first failing check names the deny reason", arguments: Row.allCases)
    func row(_ row: Row) async throws {
        let harness = try await WorkerHarness()
        let token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
        switch row {
        case .invalidReceipt:
            try await harness.submit(job("j", order: "o", product: "p", ["receipt": "bm9wZQ=="]))
        case .bundleMismatch:
            let purchase = try await harness.purchase(["product_id": "p", "bundle_id": "com.other.game"])
            try await harness.submit(job("j", order: "o", product: "p", ["receipt": purchase.receipt]))
        case .transactionNotFound:
            let purchase = try await harness.purchase(["product_id": "p"])
            try await harness.submit(
                job("j", order: "o", product: "p", ["receipt": purchase.receipt, "transaction_id": "999"]))
        case .quantityMismatch:
            let purchase = try await harness.purchase(["product_id": "p", "quantity": 1])
            try await harness.submit(job("j", order: "o", product: "p", ["receipt": purchase.receipt], quantity: 5))
        case .accountMismatch:
            let purchase = try await harness.purchase(["product_id": "p", "app_account_token": token])
            try await harness.submit(
                job(
                    "j", order: "o", product: "p",
                    [
                        "signed_transaction": purchase.signedTransaction,
                        "app_account_token": "00000000-0000-0000-0000-000000000001",
                    ]))
        case .revoked:
            let purchase = try await harness.purchase(["product_id": "p"])
            try await harness.admin.refund(transactionID: purchase.transactionID)
            try await harness.submit(job("j", order: "o", product: "p", ["receipt": purchase.receipt]))
        case .expired:
            let purchase = try await harness.purchase([
                "product_id": "p", "type": "subscription", "expires_in_seconds": -60,
            ])
            try await harness.submit(job("j", order: "o", product: "p", ["receipt": purchase.receipt]))
        case .orderAlreadyFulfilled:
            let first = try await harness.purchase(["product_id": "p"])
            let second = try await harness.purchase(["product_id": "p"])
            try await harness.submit(job("j0", order: "o", product: "p", ["receipt": first.receipt]))
            #expect(await harness.result(jobID: "j0")?["decision"] as? String == "grant")
            try await harness.submit(job("j", order: "o", product: "p", ["receipt": second.receipt]))
        }
        let event = await harness.result(jobID: "j")
        #expect(event?["decision"] as? String == "deny")
        #expect(event?["reason"] as? String == row.rawValue)
        #expect(event?["detail"] is String)
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
