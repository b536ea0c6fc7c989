import AppleVerification
@testable import Flows
import Foundation
import Kafka
import Ledger
@testable import ReceiptWorker
import Runtime
import Testing
import Messaging
import Vocabulary

/// A subscription's status asked of Apple, through the notification flow with an in-memory ledger: what Apple's
/// signed values say happened, published to the subscription's order once, and what is refused.
@Suite("Subscription statuses asked of Apple, in memory")
struct SubscriptionStatusRecordTests {
    let apple = FakeApple()
    let ledger: LedgerEngine
    let apps: AppleApps
    let jobs: JobHandler
    let notifications: NotificationHandler
    let month: TimeInterval = 30 * 86_400

    init() throws {
        ledger = try Handlers.ledger()
        apps = try Handlers.apps(apple)
        jobs = Handlers.jobs(apps, ledger: ledger)
        notifications = Handlers.notifications(apps, ledger: ledger)
    }

    func grant(_ order: String, original: String) async throws {
        apple.verified(
            Handlers.proof("proof-\(original)"), transactionID: original, product: "vip_monthly",
            type: .autoRenewableSubscription, expires: Date(timeIntervalSinceNow: month), original: original,
            line: "L-\(original)")
        let outcome = try await Handlers.run(
            jobs,
            Handlers.job(
                "job-\(order)", order: order, product: "vip_monthly",
                proof: ["receipt": Handlers.proof("proof-\(original)")]))
        #expect(outcome.event?["decision"] as? String == "grant")
    }

    /// Apple's answer: `transaction` and renewal info `renewal`, signed.
    func answer(_ transaction: [String: Any], _ renewal: [String: Any]) throws
        -> AppStoreServerAPIClient.LastTransactionsItem
    {
        var transaction = transaction
        transaction["bundleId"] = "com.example"
        transaction["environment"] = "Production"
        // Apple signs both in one answer.
        transaction["signedDate"] = transaction["signedDate"] ?? renewal["signedDate"]
        return AppStoreServerAPIClient.LastTransactionsItem(
            status: 1, originalTransactionId: transaction["originalTransactionId"] as? String,
            signedTransactionInfo: try Handlers.sign(transaction), signedRenewalInfo: try Handlers.sign(renewal))
    }

    /// A status record as anyone who can write to the topic could write it: unchecked.
    func record(_ transaction: [String: Any], _ renewal: [String: Any], bundleID: String = "com.example") throws
        -> OutboundMessage
    {
        let status = try answer(transaction, renewal)
        let value =
            "{\"subscriptionStatus\":{\"signedTransactionInfo\":\"\(status.signedTransactionInfo ?? "")\","
            + "\"signedRenewalInfo\":\"\(status.signedRenewalInfo ?? "")\"}}"
        return OutboundMessage(
            topic: "notifications", key: nil, value: Array(value.utf8),
            headers: [
                MessageHeader(name: "source", string: "subscription_status"),
                MessageHeader(name: "bundle_id", string: bundleID),
            ])
    }

    func handle(_ record: OutboundMessage) async throws -> Disposition {
        try await Handlers.run(notifications, record.value, topic: "notifications", headers: record.headers)
    }

    func renewalInfo(original: String, signed: Date = Date(), extra: [String: Any] = [:]) -> [String: Any] {
        var info: [String: Any] = [
            "originalTransactionId": original, "autoRenewProductId": "vip_monthly", "productId": "vip_monthly",
            "autoRenewStatus": 1, "signedDate": Handlers.milliseconds(signed), "environment": "Production",
        ]
        info.merge(extra) { _, new in new }
        return info
    }

    @Test(
        "what happened is read from Apple's signed values alone: renewed, grace period, billing retry, expired, revoked"
    )
    func derivedFromSignedValues() throws {
        let now = Date().timeIntervalSince1970 * 1000
        func change(expires: Double, renewal: [String: Any], revoked: Bool = false) -> String? {
            var transaction = JWSTransaction()
            transaction.expiresDate = expires
            if revoked { transaction.revocationDate = now - 1 }
            var info = JWSRenewalInfo()
            info.signedDate = now
            info.gracePeriodExpiresDate = renewal["grace"] as? Double
            info.isInBillingRetryPeriod = renewal["retry"] as? Bool
            info.expirationIntent = renewal["intent"] as? Int
            return SubscriptionStatusRecord.change(transaction, info).map {
                "\($0.type.rawValue)/\($0.subtype?.rawValue ?? "-")/\($0.status)"
            }
        }
        #expect(change(expires: now + 1000, renewal: [:]) == "DID_RENEW/-/1")
        #expect(
            change(expires: now - 1000, renewal: ["grace": now + 1000, "retry": true])
                == "DID_FAIL_TO_RENEW/GRACE_PERIOD/4")
        #expect(change(expires: now - 1000, renewal: ["retry": true]) == "DID_FAIL_TO_RENEW/-/3")
        #expect(change(expires: now - 1000, renewal: ["grace": now - 1]) == "GRACE_PERIOD_EXPIRED/-/2")
        #expect(change(expires: now - 1000, renewal: ["intent": 1]) == "EXPIRED/VOLUNTARY/2")
        #expect(change(expires: now - 1000, renewal: ["intent": 2]) == "EXPIRED/BILLING_RETRY/2")
        #expect(change(expires: now - 1000, renewal: [:]) == "EXPIRED/-/2")
        #expect(change(expires: now + 1000, renewal: [:], revoked: true) == nil)
    }

    @Test(
        "a renewal Apple never sent, asked: receipt.renewed for the subscription's order, once; the same answer again, the same event"
    )
    func renewalAsked() async throws {
        try await grant("vip-1", original: "100")
        let expires = Date(timeIntervalSinceNow: 2 * month)
        let made = await SubscriptionStatusRecord.record(
            try answer(
                Handlers.subscription("101", original: "100", line: "L2", expires: expires),
                renewalInfo(original: "100")), bundleID: "com.example", apps: apps, topic: "notifications")
        guard case .success(let (answer, _)) = made else {
            Issue.record("Apple's answer does not verify: \(made)")
            return
        }
        // The record's headers say what it stands for, as a notification's do.
        let headers = Dictionary(answer.headers.map { ($0.name, $0.stringValue ?? "") }) { a, _ in a }
        #expect(headers["source"] == "subscription_status" && headers["notification_type"] == "DID_RENEW")
        #expect(headers["bundle_id"] == "com.example" && headers["environment"] == "Production")
        #expect(answer.key == Array("100".utf8))
        let renewed = try #require(try await handle(answer).event)
        #expect(renewed["type"] as? String == "receipt.renewed" && renewed["order_id"] as? String == "vip-1")
        #expect(renewed["transaction_id"] as? String == "101" && renewed["status"] as? String == "active")
        #expect(renewed["notification_type"] as? String == "DID_RENEW")
        // Handled, it is not news from Apple: the sweep's watch for Apple's silence does not count it.
        #expect(try await ledger.newestNotificationHandled() == nil)
        #expect(try await handle(answer).event?["event_id"] as? String == renewed["event_id"] as? String)
        // Asked again later (a new answer, the same period): the same credit, never a second one.
        let again = try record(
            Handlers.subscription("101", original: "100", line: "L2", expires: expires),
            renewalInfo(original: "100", signed: Date(timeIntervalSinceNow: 60)))
        #expect(
            try await handle(again).events.allSatisfy { $0["event_id"] as? String == renewed["event_id"] as? String })
        // Extended since (support's extension, its RENEWAL_EXTENDED lost): the new expiry by an event of its own,
        // never the credit's id again, which a grant service would drop as one it holds.
        let extended = try record(
            Handlers.subscription("101", original: "100", line: "L2", expires: expires.addingTimeInterval(10 * 86_400)),
            renewalInfo(original: "100", signed: Date(timeIntervalSinceNow: 120)))
        let changed = try #require(try await handle(extended).event)
        #expect(changed["type"] as? String == "receipt.renewal_changed" && changed["order_id"] as? String == "vip-1")
        #expect(changed["event_id"] as? String != renewed["event_id"] as? String)
        #expect(changed["price"] == nil, "a change of state carries no sale")
        let later = try #require(changed["expires_at"] as? String)
        #expect(later > (renewed["expires_at"] as? String ?? "~"), "the expiry did not move: \(later)")
    }

    @Test(
        "a period a job granted, extended since and asked of Apple: the new expiry said to the subscription's order, never a credit"
    )
    func extensionAsked() async throws {
        try await grant("vip-3", original: "300")
        let extendedTo = Date(timeIntervalSinceNow: month + 10 * 86_400)
        let extended = try record(
            Handlers.subscription("300", original: "300", line: "L-300", expires: extendedTo),
            renewalInfo(original: "300", signed: Date(timeIntervalSinceNow: 60)))
        let changed = try #require(try await handle(extended).event)
        #expect(changed["type"] as? String == "receipt.renewal_changed" && changed["order_id"] as? String == "vip-3")
        #expect(changed["status"] as? String == "active" && changed["price"] == nil)
        let milliseconds = Date(timeIntervalSince1970: Double(Handlers.milliseconds(extendedTo)) / 1000)
        #expect(changed["expires_at"] as? String == RFC3339.format(milliseconds))
        // Asked again, nothing new: the same event, never a second.
        let again = try record(
            Handlers.subscription("300", original: "300", line: "L-300", expires: extendedTo),
            renewalInfo(original: "300", signed: Date(timeIntervalSinceNow: 120)))
        #expect(
            try await handle(again).events.allSatisfy { $0["event_id"] as? String == changed["event_id"] as? String })
    }

    @Test(
        "refused, nothing published: another subscription's renewal info, a forged signature, an app not configured, a body of another shape"
    )
    func hostile() async throws {
        try await grant("vip-2", original: "200")
        let expires = Date(timeIntervalSinceNow: 2 * month)
        let period = Handlers.subscription("201", original: "200", line: "L2", expires: expires)
        let mixed = try record(period, renewalInfo(original: "999"))
        var forged = try record(period, renewalInfo(original: "200"))
        forged.value[forged.value.count - 20] ^= 0x01
        let stranger = try record(period, renewalInfo(original: "200"), bundleID: "com.stranger")
        // An old period's transaction (signed a month ago) beside a recent renewal info: not one answer of Apple's.
        var old = period
        old["signedDate"] = Handlers.milliseconds(Date(timeIntervalSinceNow: -month))
        let spliced = try record(old, renewalInfo(original: "200"))
        var shaped = try record(period, renewalInfo(original: "200"))
        shaped.value = Array(#"{"subscriptionStatus":{"signedTransactionInfo":"a.b.c"}}"#.utf8)
        for hostile in [mixed, forged, stranger, shaped, spliced] {
            let outcome = try await handle(hostile)
            #expect(outcome.events.isEmpty)
            #expect(outcome.deadLetter?.reason == .malformedJob)
        }
        // The same values without the record's header are not a notification of Apple's: refused too.
        let honest = try record(period, renewalInfo(original: "200"))
        #expect(try await Handlers.run(notifications, honest.value, topic: "notifications").deadLetter != nil)
        #expect(try await handle(honest).event?["type"] as? String == "receipt.renewed")
    }
}
