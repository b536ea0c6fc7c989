import AppleVerification
import Foundation
import Testing
import TestSupport

@Suite("Retry-After over HTTP, from the App Store simulator")
struct RetryAfterClientTests {
    /// The simulator sends Apple's form, UNIX milliseconds: here 31 years ahead. Read as is, the job would
    /// wait 31 years; the client caps it at its `maximumRetryAfter`.
    @Test("a 429 whose Retry-After is years away asks for no more than the maximum wait")
    func yearsAway() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        try await harness.faults(["rate_limit_rate": 1.0, "retry_after_seconds": 1e9])
        var attempts = 0
        let receipts = await #expect(throws: AppleVerificationError.self) {
            _ = try await harness.receiptClient().verify(receipt: purchase.receipt, attempts: &attempts)
        }
        #expect(receipts?.code == .rateLimited)
        #expect(receipts?.retryDelay == VerifyReceiptClient.Configuration().maximumRetryAfter)
        let api = await #expect(throws: AppleVerificationError.self) {
            _ = try await harness.apiClient().transactionInfo(id: purchase.transactionID, attempts: &attempts)
        }
        #expect(api?.isRetriable == true)
        #expect(api?.retryDelay == AppStoreServerAPIClient.Configuration().maximumRetryAfter)
    }
}
