import AppleVerification
@testable import Events
@testable import Flows
import Foundation
import Ledger
import Messaging
@testable import ReceiptWorker
import Runtime
import Testing
import Vocabulary

/// What a purchase counts as revenue, and a purchase refunded in part before its grant (docs/contract.md sections
/// 4 and 9), through the handlers with an in-memory ledger: the events carry the one rule, so that revenue adds up
/// from them alone.
@Suite("Money: revenue from the events alone, and refunds made before a grant")
struct MoneyRulesTests {
    let apple = FakeApple()
    let ledger: LedgerEngine
    let jobs: JobHandler
    let notifications: NotificationHandler

    init() throws {
        ledger = try Handlers.ledger()
        let apps = try Handlers.apps(apple, sandbox: true)
        jobs = Handlers.jobs(apps, ledger: ledger)
        notifications = Handlers.notifications(apps, ledger: ledger, unclaimedAfter: .seconds(3_600))
    }

    static let priced = PurchaseValue(price: 2_990, currency: "USD", storefront: "USA", ownershipType: .purchased)

    func job(_ id: String, order: String, transaction: String, quantity: Int = 1) async throws -> Disposition {
        try await Handlers.run(
            jobs,
            Handlers.job(
                id, order: order, proof: ["receipt": Handlers.proof("proof-\(transaction)")],
                extra: ["quantity": quantity]))
    }

    func refund(_ transaction: String, quantity: Int = 1, share: Int? = nil, price: Int = 2_990) async throws
        -> Disposition
    {
        var fields = Handlers.transaction(transaction, quantity: quantity)
        fields["price"] = price
        fields["currency"] = "USD"
        fields["revocationDate"] = Handlers.milliseconds(Date())
        fields["revocationReason"] = 0
        if let share {
            fields["revocationPercentage"] = share
            fields["revocationType"] = "REFUND_PRORATED"
        }
        return try await Handlers.run(
            notifications, try Handlers.notification("REFUND", transaction: fields), topic: "notifications")
    }

    @Test("a sale counts a Production price the player paid; a tester's, a family member's and a receipt's, nothing")
    func sales() {
        #expect(Revenue.ofSale(Self.priced, environment: .production) == 2_990)
        #expect(Revenue.ofSale(Self.priced, environment: .sandbox) == 0)
        var family = Self.priced
        family.ownershipType = .familyShared
        #expect(Revenue.ofSale(family, environment: .production) == 0)
        #expect(Revenue.ofSale(PurchaseValue(), environment: .production) == 0)
    }

    @Test("refunds take back their share of what the sale counted, and add up to the last share to the milliunit")
    func refundShares() {
        #expect(Revenue.ofRefund(saleRevenue: 2_990, share: 33_333, refundedBefore: 0) == -997)
        let first = Revenue.ofRefund(saleRevenue: 999, share: 33_333, refundedBefore: 0) ?? 0
        let second = Revenue.ofRefund(saleRevenue: 999, share: 66_667, refundedBefore: 33_333) ?? 0
        let last = Revenue.ofRefund(saleRevenue: 999, share: 100_000, refundedBefore: 66_667) ?? 0
        #expect(first + second + last == -999)
        #expect(Revenue.ofReversal(saleRevenue: 999, refundedBefore: 66_667) == -(first + second))
        #expect(Revenue.ofRefund(saleRevenue: 0, share: 100_000, refundedBefore: 0) == 0)
        #expect(Revenue.ofRefund(saleRevenue: nil, share: 100_000, refundedBefore: 0) == nil, "not known: null")
        #expect(Revenue.ofRefund(saleRevenue: 10, share: 100_000, refundedBefore: nil) == nil)
        // Whatever Apple's price, no product overflows; a share out of range is clamped.
        #expect(Revenue.taken(.max, share: 100_000) == .max)
        #expect(Revenue.taken(1_000, share: 250_000) == 1_000 && Revenue.taken(1_000, share: -5) == 0)
    }

    @Test(
        "a refunded receipt-era purchase takes back nothing: its grant counted nothing, though Apple's refund has a price"
    )
    func receiptEraRefund() async throws {
        apple.verified(Handlers.proof("proof-3000"), transactionID: "3000")
        let grant = try #require(try await job("j-3000", order: "o-3000", transaction: "3000").event)
        #expect(grant["decision"] as? String == "grant" && grant["price"] is NSNull && grant["revenue"] as? Int == 0)
        let revoked = try #require(try await refund("3000").event)
        #expect(revoked["type"] as? String == "receipt.revoked" && revoked["price"] as? Int == 2_990)
        #expect(revoked["revenue"] as? Int == 0)
    }

    @Test("a priced sale counts its price, and its refunds take it back in shares; a reversal gives it back")
    func pricedSaleAndRefunds() async throws {
        apple.verified(Handlers.proof("proof-3100"), transactionID: "3100", value: Self.priced)
        #expect(try await job("j-3100", order: "o-3100", transaction: "3100").event?["revenue"] as? Int == 2_990)
        #expect(try await refund("3100", share: 40_000).event?["revenue"] as? Int == -1_196)
        #expect(try await refund("3100").event?["revenue"] as? Int == -1_794)
        var reversal = Handlers.transaction("3100")
        reversal["currency"] = "USD"
        let reinstated = try #require(
            try await Handlers.run(
                notifications, try Handlers.notification("REFUND_REVERSED", transaction: reversal),
                topic: "notifications"
            ).event)
        #expect(reinstated["revenue"] as? Int == 2_990 && reinstated["currency"] as? String == "USD")
    }

    @Test("a tester's Sandbox purchase, granted while Sandbox is accepted, counts nothing")
    func sandboxSale() async throws {
        apple.verified(
            Handlers.proof("proof-3200"), transactionID: "3200", environment: .sandbox, value: Self.priced)
        let grant = try #require(try await job("j-3200", order: "o-3200", transaction: "3200").event)
        #expect(grant["environment"] as? String == "Sandbox" && grant["price"] as? Int == 2_990)
        #expect(grant["revenue"] as? Int == 0)
    }

    @Test(
        "a purchase refunded in part before any order held it: granted for what was kept, the share taken back at once, both again on a re-delivery"
    )
    func partlyRefundedBeforeItsGrant() async throws {
        #expect(try await refund("3300", quantity: 3, share: 33_333).events.isEmpty, "no grant yet: nothing")
        apple.verified(Handlers.proof("proof-3300"), transactionID: "3300", quantity: 3, value: Self.priced)
        let outcome = try await job("j-3300", order: "o-3300", transaction: "3300", quantity: 3)
        let events = outcome.events
        #expect(events.map { $0["type"] as? String } == ["receipt.granted", "receipt.revoked"])
        #expect(events.first?["quantity"] as? Int == 3 && events.first?["revenue"] as? Int == 2_990)
        let taken = try #require(events.last)
        #expect(taken["order_id"] as? String == "o-3300" && taken["revocation_percentage"] as? Double == 33.333)
        #expect(taken["revenue"] as? Int == -997 && taken["notification_id"] is NSNull)
        #expect(taken["revocation_type"] as? String == "REFUND_PRORATED")
        let again = try await job("j-3300", order: "o-3300", transaction: "3300", quantity: 3)
        #expect(again.events.map { $0["event_id"] as? String } == events.map { $0["event_id"] as? String })
        // Refunded in all before any grant: revoked, as ever.
        _ = try await refund("3301")
        apple.verified(Handlers.proof("proof-3301"), transactionID: "3301", value: Self.priced)
        #expect(try await job("j-3301", order: "o-3301", transaction: "3301").event?["reason"] as? String == "revoked")
    }

    @Test(
        "Apple's own proof stating a prorated refund the ledger never heard of: granted, the share taken back at once, and the refund's notification later takes nothing twice"
    )
    func partlyRefundedProof() async throws {
        apple.verified(
            Handlers.proof("proof-3400"), transactionID: "3400", quantity: 3, revoked: Date(timeIntervalSinceNow: -60),
            revokedShare: 33_333, value: Self.priced)
        let events = try await job("j-3400", order: "o-3400", transaction: "3400", quantity: 3).events
        #expect(events.map { $0["type"] as? String } == ["receipt.granted", "receipt.revoked"])
        #expect(events.last?["revenue"] as? Int == -997 && events.last?["revocation_percentage"] as? Double == 33.333)
        #expect(try await refund("3400", quantity: 3, share: 33_333).events.isEmpty, "the same refund: nothing more")
        #expect(try await refund("3400", quantity: 3).event?["revenue"] as? Int == -1_993, "the rest, refunded later")
        apple.verified(Handlers.proof("proof-3401"), transactionID: "3401", revoked: Date(), value: Self.priced)
        #expect(try await job("j-3401", order: "o-3401", transaction: "3401").event?["reason"] as? String == "revoked")
    }

    @Test(
        "Apple's proof stating a prorated refund of a purchase the order holds, its notification lost: the grant answered again, the share taken back once, the notification later takes nothing twice"
    )
    func partlyRefundedProofAfterItsGrant() async throws {
        apple.verified(Handlers.proof("proof-3500"), transactionID: "3500", quantity: 3, value: Self.priced)
        let granted = try await job("j-3500", order: "o-3500", transaction: "3500", quantity: 3).events
        #expect(granted.map { $0["type"] as? String } == ["receipt.granted"])
        apple.verified(
            Handlers.proof("proof-3500"), transactionID: "3500", quantity: 3, revoked: Date(timeIntervalSinceNow: -60),
            revokedShare: 33_333, value: Self.priced)
        let events = try await job("j-3500-again", order: "o-3500", transaction: "3500", quantity: 3).events
        #expect(events.map { $0["type"] as? String } == ["receipt.granted", "receipt.revoked"])
        #expect(events.first?["event_id"] as? String == granted.first?["event_id"] as? String, "credited once")
        #expect(events.last?["revenue"] as? Int == -997 && events.last?["revocation_percentage"] as? Double == 33.333)
        #expect(try await refund("3500", quantity: 3, share: 33_333).events.isEmpty, "the same refund: nothing more")
        #expect(try await refund("3500", quantity: 3).event?["revenue"] as? Int == -1_993, "the rest, refunded later")
        let after = try await job("j-3500-third", order: "o-3500", transaction: "3500", quantity: 3)
        #expect(after.event?["reason"] as? String == "revoked")

        // What is taken back is the share of what the held grant's sale counted (nothing, a receipt's), whatever
        // the later proof says the price was.
        apple.verified(Handlers.proof("proof-3501"), transactionID: "3501")
        #expect(try await job("j-3501", order: "o-3501", transaction: "3501").event?["revenue"] as? Int == 0)
        apple.verified(
            Handlers.proof("proof-3501"), transactionID: "3501", revoked: Date(timeIntervalSinceNow: -60),
            revokedShare: 33_333, value: Self.priced)
        let taken = try await job("j-3501-again", order: "o-3501", transaction: "3501").events
        #expect(taken.map { $0["type"] as? String } == ["receipt.granted", "receipt.revoked"])
        #expect(taken.last?["revenue"] as? Int == 0)
    }

    @Test(
        "a purchase credited unclaimed, then refunded in part: the job that comes is tied to it and takes the share back from its order, no revenue twice"
    )
    func creditPartlyRefundedThenTied() async throws {
        var fields = Handlers.transaction("3700", quantity: 3)
        fields["price"] = 2_990
        fields["currency"] = "USD"
        _ = try await Handlers.run(
            notifications,
            try Handlers.notification(
                "ONE_TIME_CHARGE", transaction: fields, signedDate: Date(timeIntervalSinceNow: -7_200)),
            topic: "notifications")
        let credit = try #require(try await ledger.creditUnclaimed(now: Date(), limit: 10).first)
        let refunded = try #require(try await refund("3700", quantity: 3, share: 33_333).event)
        #expect(refunded["order_id"] as? String == "unclaimed:3700" && refunded["revenue"] as? Int == -997)
        apple.verified(Handlers.proof("proof-3700"), transactionID: "3700", quantity: 3)
        let events = try await job("j-3700", order: "o-3700", transaction: "3700", quantity: 3).events
        #expect(events.map { $0["type"] as? String } == ["receipt.granted", "receipt.revoked"], "\(events)")
        #expect(
            events.first?["event_id"] as? String == credit.eventID && events.first?["order_id"] as? String == "o-3700")
        #expect(events.last?["order_id"] as? String == "o-3700" && events.last?["revenue"] as? Int == 0)
    }

    @Test("a job tied to a purchase credited unclaimed says what the credit counted: one event id, one revenue")
    func tiedCreditRevenue() async throws {
        var fields = Handlers.transaction("3500")
        fields["price"] = 1_990
        fields["currency"] = "USD"
        _ = try await Handlers.run(
            notifications,
            try Handlers.notification(
                "ONE_TIME_CHARGE", transaction: fields, signedDate: Date(timeIntervalSinceNow: -7_200)),
            topic: "notifications")
        let credit = try #require(try await ledger.creditUnclaimed(now: Date(), limit: 10).first)
        let unclaimed = try #require(try JSONSerialization.jsonObject(with: Data(credit.json)) as? [String: Any])
        #expect(unclaimed["revenue"] as? Int == 1_990)
        apple.verified(Handlers.proof("proof-3500"), transactionID: "3500")  // a receipt: no price
        let tied = try #require(try await job("j-3500", order: "o-3500", transaction: "3500").event)
        #expect(tied["event_id"] as? String == credit.eventID && tied["revenue"] as? Int == 1_990)
    }

    @Test("a job whose order id starts unclaimed: is malformed: that order is a credit's")
    func reservedOrder() async throws {
        apple.verified(Handlers.proof("proof-3600"), transactionID: "3600")
        let outcome = try await job("j-3600", order: "unclaimed:3601", transaction: "3600")
        #expect(outcome.deadLetter?.reason == .malformedJob)
        #expect(outcome.events.first?["reason"] as? String == "malformed_job")
        #expect(apple.calls == 0)
        #expect(
            try await job("j-3602", order: "Unclaimed:3601", transaction: "3600").event?["decision"] as? String
                == "grant", "byte for byte: another spelling is an ordinary order")
    }
}
