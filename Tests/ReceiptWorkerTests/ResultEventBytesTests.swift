import AppleVerification
import Events
import Foundation
import LedgerDomain
import Testing
import Vocabulary

/// A grant's and a deny's event, byte for byte: every member in the contract's order (docs/contract.md, section
/// 4), absent ones null, strings escaped as JSON has them. Grant services may read the text as it is.
@Suite("The published events' bytes")
struct ResultEventBytesTests {
    func event(_ decision: ResultEvent.Decision) -> ResultEvent {
        var value = PurchaseValue(
            price: 990, currency: "USD", storefront: "USA", transactionReason: "PURCHASE", ownershipType: .purchased,
            offerType: 1)
        value.billingPlanType = "MONTHLY"
        value.commitment = TransactionCommitmentInfo(
            billingPeriodNumber: 1, totalBillingPeriods: 12, commitmentExpiresDate: 1_700_000_000_000,
            commitmentPrice: 9990)
        return ResultEvent(
            eventID: "e1", jobID: "job-1", orderID: "order \"1\"", userID: "p\n1\u{1}", decision: decision,
            productID: "coins.1000", quantity: 2, transactionID: "1000", originalTransactionID: "1000",
            environment: .production, purchaseDate: Date(timeIntervalSince1970: 1_700_000_000.123), expiresDate: nil,
            verifiedAt: Date(timeIntervalSince1970: 1_700_000_001), attempts: 1, detail: nil, bundleID: "com.example",
            value: value)
    }

    @Test("a grant support credited: its worth, revenue and who credited it")
    func grant() {
        var grant = event(.grant)
        grant.revenue = 693
        grant.credit = ResultEvent.SupportCredit(by: "agent@example.com", reason: "goodwill \\ refund")
        let expected =
            #"{"event_id":"e1","type":"receipt.granted","job_id":"job-1","order_id":"order \"1\"","user_id":"p\n1\u0001","#
            + #""decision":"grant","reason":"verified","product_id":"coins.1000","quantity":2,"transaction_id":"1000","#
            + #""original_transaction_id":"1000","environment":"Production","bundle_id":"com.example","price":990,"#
            + #""currency":"USD","storefront":"USA","transaction_reason":"PURCHASE","in_app_ownership_type":"PURCHASED","#
            + #""offer_type":1,"offer_identifier":null,"offer_discount_type":null,"offer_period":null,"#
            + #""billing_plan_type":"MONTHLY","commitment":{"billing_period_number":1,"total_billing_periods":12,"#
            + #""expires_date":"2023-11-14T22:13:20.000Z","price_after":9990},"revenue":693,"#
            + #""credited_by":"agent@example.com","credit_reason":"goodwill \\ refund","#
            + #""purchase_date":"2023-11-14T22:13:20.123Z","expires_date":null,"verified_at":"2023-11-14T22:13:21.000Z","#
            + #""attempts":1,"detail":null}"#
        #expect(String(decoding: grant.json(), as: UTF8.self) == expected)
        #expect(grant.stored().json == Array(expected.utf8))
    }

    @Test("a deny: no worth, its reason")
    func deny() {
        var deny = event(.deny(.productMismatch))
        deny.detail = "the receipt holds coins.100"
        let expected =
            #"{"event_id":"e1","type":"receipt.denied","job_id":"job-1","order_id":"order \"1\"","user_id":"p\n1\u0001","#
            + #""decision":"deny","reason":"product_mismatch","product_id":"coins.1000","quantity":2,"#
            + #""transaction_id":"1000","original_transaction_id":"1000","environment":"Production","#
            + #""bundle_id":"com.example","purchase_date":"2023-11-14T22:13:20.123Z","expires_date":null,"#
            + #""verified_at":"2023-11-14T22:13:21.000Z","attempts":1,"detail":"the receipt holds coins.100"}"#
        #expect(String(decoding: deny.json(), as: UTF8.self) == expected)
    }
}
