import Foundation
import Testing
import Vocabulary

@testable import AppleVerification

/// docs/contract.md §3, "Purchase identity": the string the ledger claims, so one purchase is granted once,
/// whichever proof and whichever device presents it.
@Suite("Purchase identity of verified transactions")
struct PurchaseIdentityTests {
    func signed(_ changes: [String: String?]) throws -> AppleTransaction {
        let verdict = try AppleVerifier.verdict(
            onSigned: try TestChain.sign(TestChain.transaction(changes)), source: .signedTransaction,
            verifier: try TestChain.verifier())
        return try #require(verdict.purchase?.transactions.first)
    }

    func receipt(_ changes: [String: String?]) throws -> AppleTransaction {
        try #require(
            try HostileReceiptTests.verdict(inApp: [HostileReceiptTests.entry(changes)]).purchase?.transactions.first)
    }

    @Test(
        "signed transactions: each of Apple's types, and a type Apple adds, by the contract's table",
        arguments: [
            ("Consumable", "2000000000000001"), ("Non-Consumable", "1000000000000009"),
            ("Non-Renewing Subscription", "1000000000000009"), ("Auto-Renewable Subscription", "w:3000000000000007"),
            ("Hologram Subscription", "2000000000000001"),
        ])
    func signedTypes(type: String, identity: String) throws {
        let transaction = try signed([
            "type": "\"\(type)\"", "originalTransactionId": #""1000000000000009""#,
            "webOrderLineItemId": #""3000000000000007""#,
        ])
        #expect(transaction.productType.rawValue == type)
        #expect(transaction.webOrderLineItemID == "3000000000000007")
        #expect(transaction.purchaseIdentity.key == identity)  // the ledger's key: bare, or `w:` for a period
    }

    @Test("without their preferred id, identities fall back to the transaction id")
    func fallbacks() throws {
        let nonConsumable = try signed(["type": #""Non-Consumable""#, "originalTransactionId": nil])
        #expect(nonConsumable.purchaseIdentity == .transaction("2000000000000001"))
        let subscription = try signed(["type": #""Auto-Renewable Subscription""#, "webOrderLineItemId": #""""#])
        #expect(subscription.purchaseIdentity == .transaction("2000000000000001"))
    }

    @Test("receipt entries: an expiry or a web order line item makes an auto-renewable subscription")
    func receiptSubscriptions() throws {
        let expiring = try receipt([
            "expires_date_ms": #""1700271930000""#, "web_order_line_item_id": #""3000000000000007""#,
        ])
        #expect(expiring.productType == .autoRenewableSubscription)
        #expect(expiring.webOrderLineItemID == "3000000000000007")
        #expect(expiring.purchaseIdentity == .billingPeriod(webOrderLineItemID: "3000000000000007"))
        let lineItemOnly = try receipt(["web_order_line_item_id": #""3000000000000008""#])
        #expect(lineItemOnly.productType == .autoRenewableSubscription)
        #expect(lineItemOnly.purchaseIdentity == .billingPeriod(webOrderLineItemID: "3000000000000008"))
        let expiryOnly = try receipt(["expires_date_ms": #""1700271930000""#])
        #expect(expiryOnly.purchaseIdentity == .transaction("1000000000000001"))
        let plain = try receipt([:])
        #expect(plain.productType == .unknown)
        #expect(plain.productType.rawValue == nil)
        #expect(plain.purchaseIdentity == .transaction("1000000000000001"))
    }

    @Test("a StoreKit 1 restore on a new device is the purchase it restores, whichever proof was granted first")
    func restoreCollides() throws {
        let original = try receipt([:])
        let restored = try receipt(["transaction_id": #""1000000000000555""#])
        let signedOriginal = try signed([
            "type": #""Non-Consumable""#, "transactionId": #""1000000000000001""#,
            "originalTransactionId": #""1000000000000001""#,
        ])
        #expect(restored.transactionID != original.transactionID)
        #expect(restored.purchaseIdentity == original.purchaseIdentity)
        #expect(restored.purchaseIdentity == signedOriginal.purchaseIdentity)
    }

    @Test("a consumable is one purchase whether its receipt entry or its signed transaction is presented")
    func consumableAcrossProofs() throws {
        let fromReceipt = try receipt(["transaction_id": #""2000000000000001""#, "original_transaction_id": nil])
        let fromSigned = try signed(["type": #""Consumable""#])
        #expect(fromReceipt.purchaseIdentity == fromSigned.purchaseIdentity)
        let another = try signed(["type": #""Consumable""#, "transactionId": #""2000000000000002""#])
        #expect(another.purchaseIdentity != fromSigned.purchaseIdentity)
    }

    @Test("a web order line item never collides with a transaction of the same number")
    func kindsDoNotCollide() {
        let period = AppleTransaction(
            transactionID: "11", productType: .autoRenewableSubscription, webOrderLineItemID: "42")
        let consumable = AppleTransaction(transactionID: "42", productType: .consumable)
        #expect(period.purchaseIdentity == .billingPeriod(webOrderLineItemID: "42"))
        #expect(consumable.purchaseIdentity == .transaction("42"))
    }
}
