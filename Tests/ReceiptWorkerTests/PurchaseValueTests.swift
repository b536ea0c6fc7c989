import AppleVerification
@testable import Flows
import Foundation
import Ledger
@testable import ReceiptWorker
import Runtime
import Testing
import Vocabulary

/// What a purchase was worth, in every event that credits or takes it back (docs/contract.md section 4), and
/// Apple's newer notification types, which change no purchase (section 9), through the handlers in memory.
@Suite("Purchase value in events; Apple's newer notification types")
struct PurchaseValueTests {
    let apple = FakeApple()
    let ledger: LedgerEngine
    let jobs: JobHandler
    let notifications: NotificationHandler

    init() throws {
        ledger = try Handlers.ledger()
        let apps = try Handlers.apps(apple, second: FakeApple(), sandbox: true)
        jobs = Handlers.jobs(apps, ledger: ledger)
        notifications = Handlers.notifications(apps, ledger: ledger)
    }

    nonisolated(unsafe) static let worth: [String: Any] = [
        "price": 4990, "currency": "EUR", "storefront": "FRA", "transactionReason": "PURCHASE", "offerType": 3,
        "offerIdentifier": "LAUNCH50", "offerDiscountType": "PAY_UP_FRONT", "offerPeriod": "P1M",
    ]

    func grant(_ id: String, order: String, worth: Bool = true) async throws -> [String: Any] {
        var fields = Handlers.transaction(id)
        if worth { fields.merge(Self.worth) { $1 } }
        fields["bundleId"] = "com.example"
        fields["environment"] = "Production"
        let jws = try Handlers.sign(fields)
        apple.answer(jws, .verified(try Self.purchase(fields)))
        let outcome = try await Handlers.run(
            jobs, Handlers.job("job-\(order)", order: order, proof: ["signed_transaction": jws]))
        return try #require(outcome.event)
    }

    static func purchase(_ fields: [String: Any]) throws -> VerifiedPurchase {
        let payload = try JSONDecoder().decode(
            JWSTransaction.self, from: try JSONSerialization.data(withJSONObject: fields))
        return VerifiedPurchase(
            source: .signedTransaction, bundleID: "com.example", environment: .production,
            transactions: [try AppleTransaction(payload)])
    }

    func expectWorth(_ event: [String: Any], _ what: String) {
        #expect(event["price"] as? Int == 4990 && event["currency"] as? String == "EUR", "\(what): \(event)")
        #expect(event["storefront"] as? String == "FRA" && event["transaction_reason"] as? String == "PURCHASE")
        #expect(event["in_app_ownership_type"] as? String == "PURCHASED" && event["offer_type"] as? Int == 3)
        #expect(event["offer_identifier"] as? String == "LAUNCH50")
        #expect(event["offer_discount_type"] as? String == "PAY_UP_FRONT" && event["offer_period"] as? String == "P1M")
    }

    @Test("a grant and the refund of it carry Apple's price, currency, storefront and offer; a refund its share")
    func grantAndRefund() async throws {
        let granted = try await grant("7000", order: "o70")
        #expect(granted["decision"] as? String == "grant")
        expectWorth(granted, "granted")
        var refunded = Handlers.transaction("7000").merging(Self.worth) { $1 }
        refunded["revocationDate"] = Handlers.milliseconds(Date())
        refunded["revocationType"] = "REFUND_PRORATED"
        refunded["revocationPercentage"] = 40_000
        let revoked = try #require(
            try await Handlers.run(
                notifications, try Handlers.notification("REFUND", transaction: refunded), topic: "notifications"
            ).event)
        #expect(revoked["type"] as? String == "receipt.revoked" && revoked["revocation_percentage"] as? Int == 40)
        expectWorth(revoked, "revoked")
    }

    @Test("a monthly instalment of a committed subscription says so: billing_plan_type and its commitment")
    func commitment() async throws {
        var fields = Handlers.transaction("7100")
        fields.merge(Self.worth) { $1 }
        fields["bundleId"] = "com.example"
        fields["environment"] = "Production"
        fields["billingPlanType"] = "MONTHLY"
        fields["commitmentInfo"] = [
            "billingPeriodNumber": 3, "totalBillingPeriods": 12, "commitmentExpiresDate": 1_830_000_000_000,
            "commitmentPrice": 119_880,
        ]
        let jws = try Handlers.sign(fields)
        apple.answer(jws, .verified(try Self.purchase(fields)))
        let granted = try #require(
            try await Handlers.run(jobs, Handlers.job("job-o71", order: "o71", proof: ["signed_transaction": jws]))
                .event)
        #expect(granted["billing_plan_type"] as? String == "MONTHLY")
        let commitment = try #require(granted["commitment"] as? [String: Any])
        #expect(commitment["billing_period_number"] as? Int == 3 && commitment["total_billing_periods"] as? Int == 12)
        #expect(commitment["price_after"] as? Int == 119_880)
        #expect(commitment["expires_date"] as? String == "2027-12-28T13:20:00.000Z")
        // Without one, both are null; Apple's payload read by the worker's own decoder the same way.
        let plain = try await grant("7101", order: "o72")
        #expect(plain["billing_plan_type"] is NSNull && plain["commitment"] is NSNull)
        let decoded = try JWSTransaction(
            payloadJSON: Array(try JSONSerialization.data(withJSONObject: fields)))
        #expect(decoded.commitmentInfo?.billingPeriodNumber == 3 && decoded.billingPlanType == "MONTHLY")
        for hostile in [["commitmentInfo": "12"], ["commitmentInfo": ["billingPeriodNumber": "three"]]] {
            #expect(throws: AppleVerificationError.self) {
                try JWSTransaction(
                    payloadJSON: Array(
                        try JSONSerialization.data(withJSONObject: fields.merging(hostile) { $1 })))
            }
        }
    }

    @Test("a proof without a price (a receipt) grants with every value field null, never a made-up price")
    func receiptSaysNone() async throws {
        apple.verified(Handlers.proof("r-7100"), transactionID: "7100")
        let event = try #require(
            try await Handlers.run(
                jobs, Handlers.job("job-7100", order: "o71", proof: ["receipt": Handlers.proof("r-7100")])
            ).event)
        #expect(event["decision"] as? String == "grant")
        for field in ["price", "currency", "storefront", "offer_type", "offer_identifier", "offer_period"] {
            #expect(event.keys.contains(field) && event[field] is NSNull, "\(field): \(event[field] ?? "absent")")
        }
    }

    @Test("a deny says nothing of worth: the value fields are a grant's")
    func denyHasNoValue() async throws {
        apple.verified(Handlers.proof("r-7200"), transactionID: "7200", quantity: 2)
        let event = try #require(
            try await Handlers.run(
                jobs, Handlers.job("job-7200", order: "o72", proof: ["receipt": Handlers.proof("r-7200")])
            ).event)
        #expect(event["reason"] as? String == "quantity_mismatch" && !event.keys.contains("price"), "\(event)")
    }

    @Test(
        "METADATA_UPDATE, MIGRATION, PRICE_CHANGE, EXTERNAL_PURCHASE_TOKEN's CREATED and ACTIVE_TOKEN_REMINDER, and a type Apple adds later: no event, no change, no error (RESCIND_CONSENT: NotificationHandlerTests)"
    )
    func newerTypesChangeNothing() async throws {
        _ = try await grant("7300", order: "o73")
        let cases: [(String, String?)] = [
            ("METADATA_UPDATE", nil), ("MIGRATION", nil), ("PRICE_CHANGE", nil),
            ("EXTERNAL_PURCHASE_TOKEN", "CREATED"), ("EXTERNAL_PURCHASE_TOKEN", "ACTIVE_TOKEN_REMINDER"),
            ("SOMETHING_APPLE_ADDS_IN_2030", "AND_A_SUBTYPE"),
        ]
        for (type, subtype) in cases {
            let body = try Handlers.notification(type, subtype: subtype, transaction: Handlers.transaction("7300"))
            let outcome = try await Handlers.run(notifications, body, topic: "notifications")
            #expect(outcome.events.isEmpty && outcome.deadLetter == nil, "\(type) \(subtype ?? ""): \(outcome)")
        }
        // The grant is as it was: a refund still revokes it for its order.
        let refund = try #require(
            try await Handlers.run(
                notifications, try Handlers.notification("REFUND", transaction: Handlers.transaction("7300")),
                topic: "notifications"
            ).event)
        #expect(refund["order_id"] as? String == "o73")
        #expect(NotificationType(rawValue: "RESCIND_CONSENT").isKnown)
        #expect(!NotificationType(rawValue: "SOMETHING_APPLE_ADDS_IN_2030").isKnown)
    }
}
