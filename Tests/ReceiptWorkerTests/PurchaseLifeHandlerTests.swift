import AppleVerification
@testable import Flows
import Foundation
import Ledger
import Messaging
import Observability
@testable import ReceiptWorker
import Runtime
import Testing
import Vocabulary

/// A subscription's life after its grant, and purchases no job claimed (docs/contract.md section 9), through
/// the handlers with an in-memory ledger: each notification type, its repetition and its disorder.
@Suite("Subscriptions and purchases no job claimed, in memory")
struct PurchaseLifeHandlerTests {
    let apple = FakeApple()
    let ledger: LedgerEngine
    let jobs: JobHandler
    let notifications: NotificationHandler
    let month: TimeInterval = 30 * 86_400

    init() throws {
        ledger = try Handlers.ledger()
        let apps = try Handlers.apps(apple)
        jobs = Handlers.jobs(apps, ledger: ledger)
        notifications = Handlers.notifications(apps, ledger: ledger, unclaimedAfter: .seconds(3_600))
    }

    func notify(_ body: [UInt8]) async throws -> Disposition {
        try await Handlers.run(notifications, body, topic: "notifications")
    }

    /// A job for `order` presenting subscription period `id` (original `original`, line `line`).
    func job(
        _ order: String, period id: String, original: String, line: String, token: String? = nil,
        job jobID: String? = nil, expires: Date? = nil
    ) async throws -> Disposition {
        apple.verified(
            Handlers.proof("proof-\(id)"), transactionID: id, product: "vip_monthly",
            type: .autoRenewableSubscription, token: token, expires: expires ?? Date(timeIntervalSinceNow: month),
            original: original, line: line)
        var extra: [String: Any] = [:]
        if let token { extra["app_account_token"] = token }
        return try await Handlers.run(
            jobs,
            Handlers.job(
                jobID ?? "job-\(order)-\(id)", order: order, product: "vip_monthly",
                proof: ["receipt": Handlers.proof("proof-\(id)")], extra: extra))
    }

    @Test(
        "a billing issue recovered by a period a job granted to a new order: the recovery is said to the subscription's order"
    )
    func recoveryPresentedByAJob() async throws {
        _ = try await job("vip-5", period: "500", original: "500", line: "B1")
        let failed = try #require(
            try await notify(
                try Handlers.notification(
                    "DID_FAIL_TO_RENEW",
                    transaction: Handlers.subscription(
                        "500", original: "500", line: "B1", expires: Date(timeIntervalSinceNow: -3_600)),
                    signedDate: Date(timeIntervalSinceNow: -3_600),
                    extra: try Handlers.renewal(
                        original: "500", status: 3, signedDate: Date(timeIntervalSinceNow: -3_600)))
            ).event)
        #expect(failed["type"] as? String == "receipt.billing_issue" && failed["status"] as? String == "billing_retry")
        // Apple's retry charged the player: the new period, presented by the game for a new order.
        let periodEnd = Date(
            timeIntervalSince1970: Double(Handlers.milliseconds(Date(timeIntervalSinceNow: month))) / 1000)
        #expect(
            try await job("vip-5b", period: "501", original: "500", line: "B2", expires: periodEnd)
                .event?["decision"] as? String == "grant")
        let recovered = try #require(
            try await notify(
                try Handlers.notification(
                    "DID_RENEW", subtype: "BILLING_RECOVERY",
                    transaction: Handlers.subscription("501", original: "500", line: "B2", expires: periodEnd),
                    extra: try Handlers.renewal(original: "500"))
            ).event)
        #expect(
            recovered["type"] as? String == "receipt.renewal_changed" && recovered["order_id"] as? String == "vip-5")
        #expect(recovered["status"] as? String == "active" && recovered["price"] == nil, "never a second credit")
    }

    @Test(
        "a renewal is credited to the subscription's order once; presented by a job for another order, it is a duplicate"
    )
    func renewal() async throws {
        #expect(
            try await job("vip-1", period: "100", original: "100", line: "L1").event?["decision"] as? String == "grant")
        let expires = Date(timeIntervalSinceNow: 2 * month)
        let body = try Handlers.notification(
            "DID_RENEW", transaction: Handlers.subscription("101", original: "100", line: "L2", expires: expires),
            extra: try Handlers.renewal(original: "100"))
        let renewed = try #require(try await notify(body).event)
        #expect(renewed["type"] as? String == "receipt.renewed" && renewed["order_id"] as? String == "vip-1")
        #expect(renewed["user_id"] as? String == "player-1" && renewed["transaction_id"] as? String == "101")
        #expect(renewed["original_transaction_id"] as? String == "100" && renewed["status"] as? String == "active")
        #expect(
            renewed["expires_at"] as? String
                == RFC3339.format(Date(timeIntervalSince1970: Double(Handlers.milliseconds(expires)) / 1000)))
        #expect(renewed["auto_renew"] as? Bool == true && renewed["auto_renew_product_id"] as? String == "vip_monthly")
        // Apple's retry of the same notification: the same event.
        #expect(try await notify(body).event?["event_id"] as? String == renewed["event_id"] as? String)
        // The renewal's transaction presented for another order: a duplicate; for the subscription's own order:
        // the same credit (the renewal's event id), never a second one.
        #expect(
            try await job("other", period: "101", original: "100", line: "L2").event?["reason"] as? String
                == "duplicate_transaction")
        let same = try #require(try await job("vip-1", period: "101", original: "100", line: "L2").event)
        #expect(same["decision"] as? String == "grant" && same["event_id"] as? String == renewed["event_id"] as? String)
    }

    @Test(
        "a period refunded before its renewal was heard of, the refund then reversed: credited to the subscription's order as its renewal"
    )
    func reversedBeforeRenewal() async throws {
        _ = try await job("vip-8", period: "800", original: "800", line: "P1")
        let period = Handlers.subscription(
            "801", original: "800", line: "P2", expires: Date(timeIntervalSinceNow: month))
        let now = Date()
        let refund = try Handlers.notification("REFUND", transaction: period, signedDate: now.addingTimeInterval(-120))
        #expect(try await notify(refund).event == nil, "no grant of the period to take back")
        let renewal = try Handlers.notification(
            "DID_RENEW", transaction: period, signedDate: now.addingTimeInterval(-60),
            extra: try Handlers.renewal(original: "800"))
        #expect(try await notify(renewal).event == nil, "refunded: not credited")
        let reversed = try #require(
            try await notify(
                try Handlers.notification(
                    "REFUND_REVERSED", transaction: period, extra: try Handlers.renewal(original: "800"))
            ).event)
        #expect(reversed["type"] as? String == "receipt.renewed" && reversed["order_id"] as? String == "vip-8")
        #expect(reversed["transaction_id"] as? String == "801" && reversed["status"] as? String == "active")
        #expect(reversed["notification_type"] as? String == "REFUND_REVERSED")
        // The game presenting the period for the subscription's order: that credit, never a second.
        let same = try #require(try await job("vip-8", period: "801", original: "800", line: "P2").event)
        #expect(same["decision"] as? String == "grant")
        #expect(same["event_id"] as? String == reversed["event_id"] as? String)
    }

    @Test("a notification older than the last one changes nothing; a late renewal is still credited, once")
    func disorder() async throws {
        _ = try await job("vip-2", period: "200", original: "200", line: "M1")
        let now = Date()
        let lateRenewal = try Handlers.notification(
            "DID_RENEW",
            transaction: Handlers.subscription(
                "201", original: "200", line: "M2", expires: now.addingTimeInterval(month)),
            signedDate: now.addingTimeInterval(-300), extra: try Handlers.renewal(original: "200"))
        let off = try await notify(
            try Handlers.notification(
                "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED",
                transaction: Handlers.subscription(
                    "200", original: "200", line: "M1", expires: now.addingTimeInterval(60)),
                signedDate: now.addingTimeInterval(-100), extra: try Handlers.renewal(original: "200", autoRenew: false)
            ))
        #expect(
            off.event?["type"] as? String == "receipt.renewal_changed" && off.event?["auto_renew"] as? Bool == false)
        // A billing failure signed before the change: stale, nothing.
        let stale = try await notify(
            try Handlers.notification(
                "DID_FAIL_TO_RENEW",
                transaction: Handlers.subscription(
                    "200", original: "200", line: "M1", expires: now.addingTimeInterval(60)),
                signedDate: now.addingTimeInterval(-200), extra: try Handlers.renewal(original: "200", status: 3)))
        #expect(stale.events.isEmpty && stale.deadLetter == nil)
        let expired = try #require(
            try await notify(
                try Handlers.notification(
                    "EXPIRED", subtype: "VOLUNTARY",
                    transaction: Handlers.subscription(
                        "200", original: "200", line: "M1", expires: now.addingTimeInterval(-10)),
                    extra: try Handlers.renewal(original: "200", autoRenew: false, status: 2))
            ).event)
        #expect(expired["type"] as? String == "receipt.expired" && expired["status"] as? String == "expired")
        #expect(expired["notification_subtype"] as? String == "VOLUNTARY")
        // The renewal delivered after all of them is a purchase: credited once; the state stays the newest.
        let renewed = try #require(try await notify(lateRenewal).event)
        #expect(renewed["type"] as? String == "receipt.renewed" && renewed["status"] as? String == "expired")
        #expect(renewed["auto_renew"] as? Bool == false)
        #expect(try await notify(lateRenewal).event?["event_id"] as? String == renewed["event_id"] as? String)
    }

    @Test("a billing failure in a grace period says until when; a subscription never granted here publishes nothing")
    func billingIssue() async throws {
        _ = try await job("vip-3", period: "300", original: "300", line: "N1")
        let grace = Date(timeIntervalSinceNow: 16 * 86_400)
        let issue = try #require(
            try await notify(
                try Handlers.notification(
                    "DID_FAIL_TO_RENEW", subtype: "GRACE_PERIOD",
                    transaction: Handlers.subscription("300", original: "300", line: "N1", expires: Date()),
                    extra: try Handlers.renewal(original: "300", status: 4, grace: grace))
            ).event)
        #expect(issue["type"] as? String == "receipt.billing_issue" && issue["status"] as? String == "grace_period")
        #expect(issue["grace_period_expires_at"] as? String != nil)
        let unknown = try await notify(
            try Handlers.notification(
                "DID_RENEW",
                transaction: Handlers.subscription(
                    "901", original: "900", line: "Z2", expires: Date(timeIntervalSinceNow: month)),
                extra: try Handlers.renewal(original: "900")))
        #expect(unknown.events.isEmpty && unknown.deadLetter == nil)
    }

    @Test(
        "a purchase no job claims in time is credited by receipt.unclaimed; a job presenting it later is tied to that credit"
    )
    func unclaimed() async throws {
        let token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
        var transaction = Handlers.transaction("400", product: "gems_500")
        transaction["appAccountToken"] = token
        let reported = try Handlers.notification("ONE_TIME_CHARGE", transaction: transaction)
        #expect(try await notify(reported).events.isEmpty)
        #expect(try await ledger.waitingUnclaimed() == 1)
        // Not due yet: nothing.
        #expect(try await ledger.creditUnclaimed(now: Date(), limit: 10).isEmpty)
        let credits = try await ledger.creditUnclaimed(now: Date(timeIntervalSinceNow: 3_601), limit: 10)
        let credit = try #require(credits.count == 1 ? credits[0] : nil)
        let event = try #require(try JSONSerialization.jsonObject(with: Data(credit.json)) as? [String: Any])
        #expect(event["type"] as? String == "receipt.unclaimed" && event["app_account_token"] as? String == token)
        #expect(event["product_id"] as? String == "gems_500" && event["order_id"] as? String == "unclaimed:400")
        #expect(event["user_id"] is NSNull && credit.key == "unclaimed:400")
        // Published again until acknowledged, then not; a second report of it changes nothing.
        #expect(try await ledger.creditUnclaimed(now: Date(timeIntervalSinceNow: 3_601), limit: 10) == [credit])
        try await ledger.markCreditsPublished(eventIDs: [credit.eventID])
        #expect(try await notify(reported).events.isEmpty)
        #expect(try await ledger.creditUnclaimed(now: Date(timeIntervalSinceNow: 7_200), limit: 10).isEmpty)
        // The player comes back: the job is answered with the credit's event id, for its own order.
        apple.verified(Handlers.proof("proof-400"), transactionID: "400", product: "gems_500", token: token)
        let late = Handlers.job(
            "late", order: "shop-9", product: "gems_500", proof: ["receipt": Handlers.proof("proof-400")],
            extra: ["app_account_token": token])
        let tied = try #require(try await Handlers.run(jobs, late).event)
        #expect(tied["decision"] as? String == "grant" && tied["order_id"] as? String == "shop-9")
        #expect(tied["event_id"] as? String == credit.eventID)
        #expect(try await Handlers.run(jobs, late).event?["event_id"] as? String == credit.eventID)
        // The order service retries under a new job id: the same credit, never a second one.
        let retried = Handlers.job(
            "late-retry", order: "shop-9", product: "gems_500", proof: ["receipt": Handlers.proof("proof-400")],
            extra: ["app_account_token": token])
        #expect(try await Handlers.run(jobs, retried).event?["event_id"] as? String == credit.eventID)
        // Now the order's: another order presenting it is a duplicate.
        let other = Handlers.job(
            "other", order: "shop-10", product: "gems_500", proof: ["receipt": Handlers.proof("proof-400")])
        #expect(try await Handlers.run(jobs, other).event?["reason"] as? String == "duplicate_transaction")
        // And a refund of it names the tied order.
        let refund = try await notify(try Handlers.notification("REFUND", transaction: transaction))
        #expect(refund.event?["order_id"] as? String == "shop-9")
    }

    @Test("a reported purchase claimed by a job in time, or refunded, is never credited")
    func claimedInTime() async throws {
        let reported = try Handlers.notification("ONE_TIME_CHARGE", transaction: Handlers.transaction("500"))
        _ = try await notify(reported)
        apple.verified(Handlers.proof("proof-500"), transactionID: "500")
        _ = try await Handlers.run(
            jobs, Handlers.job("j500", order: "o500", proof: ["receipt": Handlers.proof("proof-500")]))
        _ = try await notify(try Handlers.notification("ONE_TIME_CHARGE", transaction: Handlers.transaction("501")))
        _ = try await notify(try Handlers.notification("REFUND", transaction: Handlers.transaction("501")))
        #expect(try await ledger.creditUnclaimed(now: Date(timeIntervalSinceNow: 3_601), limit: 10).isEmpty)
        #expect(try await ledger.waitingUnclaimed() == 0)
    }

    @Test("an unclaimed subscription's renewals follow its credit, then the order a job ties it to")
    func unclaimedSubscription() async throws {
        let token = "0c9bd6c2-7d2c-4a5e-a0c5-3a1b0b8a4f11"
        let first = Handlers.subscription(
            "600", original: "600", line: "P1", expires: Date(timeIntervalSinceNow: month), token: token)
        _ = try await notify(
            try Handlers.notification(
                "SUBSCRIBED", subtype: "INITIAL_BUY", transaction: first,
                extra: try Handlers.renewal(original: "600")))
        let credits = try await ledger.creditUnclaimed(now: Date(timeIntervalSinceNow: 3_601), limit: 10)
        #expect(credits.map(\.key) == ["unclaimed:600"])
        let renewal = try await notify(
            try Handlers.notification(
                "DID_RENEW",
                transaction: Handlers.subscription(
                    "601", original: "600", line: "P2", expires: Date(timeIntervalSinceNow: 2 * month), token: token),
                extra: try Handlers.renewal(original: "600")))
        #expect(renewal.event?["order_id"] as? String == "unclaimed:600")
        let tied = try await job("vip-6", period: "600", original: "600", line: "P1", token: token)
        #expect(tied.event?["event_id"] as? String == credits.first?.eventID)
        let expired = try await notify(
            try Handlers.notification(
                "EXPIRED",
                transaction: Handlers.subscription("601", original: "600", line: "P2", expires: Date(), token: token),
                extra: try Handlers.renewal(original: "600", autoRenew: false, status: 2)))
        #expect(expired.event?["order_id"] as? String == "vip-6" && expired.event?["user_id"] as? String == "player-1")
    }

    @Test("a renewal that comes before its subscription's grant waits for a job, as a reported purchase")
    func renewalBeforeGrant() async throws {
        let early = try await notify(
            try Handlers.notification(
                "DID_RENEW",
                transaction: Handlers.subscription(
                    "801", original: "800", line: "E2", expires: Date(timeIntervalSinceNow: month)),
                extra: try Handlers.renewal(original: "800")))
        #expect(early.events.isEmpty && early.deadLetter == nil)
        #expect(try await ledger.waitingUnclaimed() == 1)
        let credits = try await ledger.creditUnclaimed(now: Date(timeIntervalSinceNow: 3_601), limit: 10)
        #expect(credits.map(\.key) == ["unclaimed:801"])
    }

    @Test(
        "a family member's renewal (FAMILY_SHARED) is never credited unclaimed: the family member paid nothing; the purchaser's own renewal is"
    )
    func familyRenewal() async throws {
        var shared = Handlers.subscription(
            "851", original: "850", line: "F2", expires: Date(timeIntervalSinceNow: month))
        shared["inAppOwnershipType"] = "FAMILY_SHARED"
        let family = try await notify(
            try Handlers.notification("DID_RENEW", transaction: shared, extra: try Handlers.renewal(original: "850")))
        #expect(family.events.isEmpty && family.deadLetter == nil)
        #expect(try await ledger.waitingUnclaimed() == 0)
        #expect(try await ledger.creditUnclaimed(now: Date(timeIntervalSinceNow: 3_601), limit: 10).isEmpty)
        // The purchaser's renewal of the same kind is a purchase Apple reported: credited if no job claims it.
        _ = try await notify(
            try Handlers.notification(
                "DID_RENEW",
                transaction: Handlers.subscription(
                    "861", original: "860", line: "G2", expires: Date(timeIntervalSinceNow: month)),
                extra: try Handlers.renewal(original: "860")))
        let credits = try await ledger.creditUnclaimed(now: Date(timeIntervalSinceNow: 3_601), limit: 10)
        #expect(credits.map(\.key) == ["unclaimed:861"])
    }

    @Test(
        "an offer code's first purchase or resubscription (OFFER_REDEEMED INITIAL_BUY, RESUBSCRIBE) is a purchase Apple reported; an offer for the active subscription or a downgrade starts nothing"
    )
    func offerRedeemed() async throws {
        for (id, subtype) in [("910", "INITIAL_BUY"), ("920", "RESUBSCRIBE")] {
            _ = try await notify(
                try Handlers.notification(
                    "OFFER_REDEEMED", subtype: subtype,
                    transaction: Handlers.subscription(
                        id, original: id, line: "O\(id)", expires: Date(timeIntervalSinceNow: month)),
                    extra: try Handlers.renewal(original: id)))
        }
        for (id, subtype) in [("930", nil), ("940", "DOWNGRADE")] as [(String, String?)] {
            let outcome = try await notify(
                try Handlers.notification(
                    "OFFER_REDEEMED", subtype: subtype,
                    transaction: Handlers.subscription(
                        id, original: id, line: "O\(id)", expires: Date(timeIntervalSinceNow: month)),
                    extra: try Handlers.renewal(original: id)))
            #expect(outcome.events.isEmpty && outcome.deadLetter == nil)
        }
        let credits = try await ledger.creditUnclaimed(now: Date(timeIntervalSinceNow: 3_601), limit: 10)
        #expect(Set(credits.map(\.key)) == ["unclaimed:910", "unclaimed:920"])
    }

    @Test(
        "an upgrade charged at once (DID_CHANGE_RENEWAL_PREF UPGRADE) is a new period: credited to the subscription's order as a renewal, or reported when no order holds it; a downgrade credits nothing"
    )
    func upgrade() async throws {
        _ = try await job("vip-up", period: "950", original: "950", line: "U1")
        let upgraded = try #require(
            try await notify(
                try Handlers.notification(
                    "DID_CHANGE_RENEWAL_PREF", subtype: "UPGRADE",
                    transaction: Handlers.subscription(
                        "951", original: "950", line: "U2", product: "vip_premium",
                        expires: Date(timeIntervalSinceNow: month)),
                    extra: try Handlers.renewal(original: "950"))
            ).event)
        #expect(upgraded["type"] as? String == "receipt.renewed" && upgraded["order_id"] as? String == "vip-up")
        #expect(upgraded["product_id"] as? String == "vip_premium" && upgraded["transaction_id"] as? String == "951")
        // The upgraded period presented by a job for another order: the subscription's, a duplicate.
        #expect(
            try await job("thief", period: "951", original: "950", line: "U2").event?["reason"] as? String
                == "duplicate_transaction")
        let downgraded = try #require(
            try await notify(
                try Handlers.notification(
                    "DID_CHANGE_RENEWAL_PREF", subtype: "DOWNGRADE",
                    transaction: Handlers.subscription(
                        "951", original: "950", line: "U2", product: "vip_premium",
                        expires: Date(timeIntervalSinceNow: month)),
                    extra: try Handlers.renewal(original: "950"))
            ).event)
        #expect(downgraded["type"] as? String == "receipt.renewal_changed")
        // An upgrade of a subscription no order here holds waits for a job, as any reported purchase.
        _ = try await notify(
            try Handlers.notification(
                "DID_CHANGE_RENEWAL_PREF", subtype: "UPGRADE",
                transaction: Handlers.subscription(
                    "961", original: "960", line: "V2", product: "vip_premium",
                    expires: Date(timeIntervalSinceNow: month)),
                extra: try Handlers.renewal(original: "960")))
        let credits = try await ledger.creditUnclaimed(now: Date(timeIntervalSinceNow: 3_601), limit: 10)
        #expect(credits.map(\.key) == ["unclaimed:961"])
    }

    @Test("with notifications.unclaimed_after_ms=0 a reported purchase is only kept on the topic")
    func unclaimedOff() async throws {
        let off = Handlers.notifications(try Handlers.apps(apple), ledger: ledger)
        _ = try await Handlers.run(
            off, try Handlers.notification("ONE_TIME_CHARGE", transaction: Handlers.transaction("700")),
            topic: "notifications")
        #expect(try await ledger.waitingUnclaimed() == 0)
    }
}
