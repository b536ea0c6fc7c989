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

/// The notification flow's rules (docs/contract.md section 9) through its handler, with an in-memory ledger
/// and notifications signed with Apple's test chain: the table of what each notification does.
@Suite("The notification flow: every rule, in memory")
struct NotificationHandlerTests {
    let apple = FakeApple()
    let ledger: LedgerEngine
    let jobs: JobHandler
    let notifications: NotificationHandler
    let apps: AppleApps

    init() throws {
        ledger = try Handlers.ledger()
        apps = try Handlers.apps(apple, second: FakeApple(), sandbox: true)
        jobs = Handlers.jobs(apps, ledger: ledger)
        notifications = Handlers.notifications(apps, ledger: ledger)
    }

    /// Grants transaction `id` to `order` through the job flow.
    func grant(_ id: String, order: String, environment: AppleEnvironment = .production) async throws {
        apple.verified(Handlers.proof("proof-\(id)"), transactionID: id, environment: environment)
        let outcome = try await Handlers.run(
            jobs, Handlers.job("job-\(order)", order: order, proof: ["receipt": Handlers.proof("proof-\(id)")]))
        #expect(outcome.event?["decision"] as? String == "grant")
    }

    func notify(_ body: [UInt8]) async throws -> Disposition {
        try await Handlers.run(notifications, body, topic: "notifications")
    }

    @Test("a refund of a granted purchase revokes it for its order; the same notification again repeats its event")
    func refund() async throws {
        try await grant("1000", order: "o1")
        let body = try Handlers.notification("REFUND", transaction: Handlers.transaction("1000"))
        let revoked = try #require(try await notify(body).event)
        #expect(revoked["type"] as? String == "receipt.revoked" && revoked["order_id"] as? String == "o1")
        #expect(revoked["user_id"] as? String == "player-1" && revoked["product_id"] as? String == "coins_100")
        #expect(revoked["bundle_id"] as? String == "com.example" && revoked["environment"] as? String == "Production")
        #expect(try await notify(body).event?["event_id"] as? String == revoked["event_id"] as? String)
        // A second refund (another notification) changes nothing; the purchase presented again is revoked.
        #expect(
            try await notify(try Handlers.notification("REFUND", transaction: Handlers.transaction("1000"))).events
                .isEmpty)
        apple.verified(Handlers.proof("again"), transactionID: "1000")
        let again = try await Handlers.run(
            jobs, Handlers.job("j-again", order: "o9", proof: ["receipt": Handlers.proof("again")]))
        #expect(again.event?["reason"] as? String == "revoked")
    }

    @Test(
        "a prorated refund, then a full one: each publishes receipt.revoked with its own id and the share taken back in all; the same full refund again, or a smaller share, publishes nothing"
    )
    func secondRefund() async throws {
        try await grant("1100", order: "o11")
        func refund(_ type: String, _ milliunits: Int?, at offset: TimeInterval) throws -> [UInt8] {
            var transaction = Handlers.transaction("1100")
            transaction["revocationDate"] = Handlers.milliseconds(Date(timeIntervalSinceNow: offset))
            transaction["revocationType"] = type
            if let milliunits { transaction["revocationPercentage"] = milliunits }
            return try Handlers.notification(
                "REFUND", transaction: transaction, signedDate: Date(timeIntervalSinceNow: offset))
        }
        let prorated = try #require(try await notify(try refund("REFUND_PRORATED", 40_000, at: -300)).event)
        #expect(prorated["revocation_percentage"] as? Double == 40 && prorated["order_id"] as? String == "o11")
        let full = try #require(try await notify(try refund("REFUND_FULL", 100_000, at: -200)).event)
        #expect(full["type"] as? String == "receipt.revoked" && full["revocation_type"] as? String == "REFUND_FULL")
        #expect(full["revocation_percentage"] as? Double == 100)
        #expect(full["event_id"] as? String != prorated["event_id"] as? String)
        // Nothing more to take back: the same share again, or a smaller one, publishes nothing.
        #expect(try await notify(try refund("REFUND_FULL", nil, at: -100)).events.isEmpty)
        #expect(try await notify(try refund("REFUND_PRORATED", 50_000, at: -50)).events.isEmpty)
    }

    @Test("a reversal reinstates; a refund older than the reversal (Apple's retry, a backfill) changes nothing")
    func reversalAndStaleRefund() async throws {
        try await grant("2000", order: "o2")
        let refundedAt = Date(timeIntervalSinceNow: -120)
        _ = try await notify(
            try Handlers.notification("REFUND", transaction: Handlers.transaction("2000"), signedDate: refundedAt))
        let reinstated = try await notify(
            try Handlers.notification("REFUND_REVERSED", transaction: Handlers.transaction("2000")))
        #expect(reinstated.event?["type"] as? String == "receipt.reinstated")
        let stale = try await notify(
            try Handlers.notification(
                "REFUND", transaction: Handlers.transaction("2000"), signedDate: refundedAt.addingTimeInterval(1)))
        #expect(stale.events.isEmpty)
    }

    @Test("a refund before any grant is remembered: the purchase presented afterwards is denied revoked")
    func refundBeforeGrant() async throws {
        #expect(
            try await notify(try Handlers.notification("REFUND", transaction: Handlers.transaction("3000"))).events
                .isEmpty)
        apple.verified(Handlers.proof("proof-3000"), transactionID: "3000")
        let denied = try await Handlers.run(
            jobs, Handlers.job("j3", order: "o3", proof: ["receipt": Handlers.proof("proof-3000")]))
        #expect(denied.event?["reason"] as? String == "revoked")
    }

    @Test("a consumption request is kept only for a purchase granted here; the gauge never alarms for another")
    func consumptionRequests() async throws {
        let unknown = try await notify(
            try Handlers.notification("CONSUMPTION_REQUEST", transaction: Handlers.transaction("4000")))
        #expect(unknown.events.isEmpty)
        #expect(try await ledger.oldestOpenConsumptionRequests().isEmpty)
        try await grant("4001", order: "o4")
        let requested = try await notify(
            try Handlers.notification(
                "CONSUMPTION_REQUEST", transaction: Handlers.transaction("4001"),
                extra: ["consumptionRequestReason": "UNINTENDED_PURCHASE"]))
        let event = try #require(requested.event)
        #expect(event["type"] as? String == "receipt.consumption_requested")
        #expect(event["consumption_request_reason"] as? String == "UNINTENDED_PURCHASE")
        #expect(try await ledger.oldestOpenConsumptionRequests()[.defaultApp] != nil)
    }

    @Test("a Sandbox notification never touches a Production grant of the same transaction id, and is answered")
    func environmentsAreApart() async throws {
        try await grant("5000", order: "o5")
        let sandboxRefund = try await notify(
            try Handlers.notification("REFUND", transaction: Handlers.transaction("5000"), environment: "Sandbox"))
        #expect(sandboxRefund.events.isEmpty && sandboxRefund.deadLetter == nil)
        // The Production purchase is still granted, and its own refund still revokes it.
        let refund = try await notify(try Handlers.notification("REFUND", transaction: Handlers.transaction("5000")))
        #expect(refund.event?["order_id"] as? String == "o5")
    }

    @Test(
        "nested signed data without an environment (Apple's older transactions and renewal info) takes the notification's: acted on, never dropped; one of another environment is refused"
    )
    func nestedWithoutEnvironment() async throws {
        try await grant("1500", order: "o15")
        var transaction = Handlers.transaction("1500")
        transaction["environment"] = NSNull()
        let refund = try #require(
            try await notify(try Handlers.notification("REFUND", transaction: transaction)).event)
        #expect(refund["type"] as? String == "receipt.revoked" && refund["environment"] as? String == "Production")
        // The receiver's verification accepts it (so Apple gets a 200 for a notification that was kept).
        let renewalBody = try Handlers.notification(
            "DID_CHANGE_RENEWAL_STATUS", transaction: transaction,
            extra: try Handlers.renewal(original: "1500", environment: nil))
        guard case .verified(let verified) = AppleNotification.verify(body: Data(renewalBody), apps: apps) else {
            Issue.record("a notification whose nested data names no environment was not verified")
            return
        }
        #expect(verified.environment == .production && verified.renewalInfo != nil)
        // A Sandbox transaction inside a Production notification: refused, never applied to the Production grant.
        var sandbox = Handlers.transaction("1500")
        sandbox["environment"] = "Sandbox"
        let mixed = try Handlers.notification(
            "REFUND", transaction: nil,
            extra: ["signedTransactionInfo": try Handlers.sign(sandbox.merging(["bundleId": "com.example"]) { $1 })])
        #expect(try await notify(mixed).deadLetter?.reason == .malformedJob)
    }

    @Test("a family member's revocation revokes that member's transaction, never the purchaser's purchase")
    func familySharing() async throws {
        apple.verified(Handlers.proof("proof-6000"), transactionID: "6000", type: .nonConsumable)
        _ = try await Handlers.run(
            jobs, Handlers.job("j6", order: "o6", proof: ["receipt": Handlers.proof("proof-6000")]))
        var member = Handlers.transaction("6001")
        member["originalTransactionId"] = "6000"
        member["type"] = "Non-Consumable"
        member["inAppOwnershipType"] = "FAMILY_SHARED"
        #expect(try await notify(try Handlers.notification("REVOKE", transaction: member)).events.isEmpty)
        apple.verified(Handlers.proof("again-6000"), transactionID: "6000", type: .nonConsumable)
        let again = try await Handlers.run(
            jobs, Handlers.job("j6", order: "o6", proof: ["receipt": Handlers.proof("proof-6000")]))
        #expect(again.event?["decision"] as? String == "grant")
    }

    @Test(
        "notifications that carry externalPurchaseToken or appData instead of data are verified: kept, or (a withdrawn consent without its download) dead-lettered in sight"
    )
    func otherShapes() async throws {
        for (type, field, value, kept) in [
            (
                "EXTERNAL_PURCHASE_TOKEN", "externalPurchaseToken",
                [
                    "externalPurchaseId": "b2f3c4d5", "tokenCreationDate": Handlers.milliseconds(Date()),
                    "appAppleId": 1234, "bundleId": "com.example",
                ] as [String: Any], true
            ),
            (
                "RESCIND_CONSENT", "appData",
                ["appAppleId": 1234, "bundleId": "com.example", "environment": "Production"] as [String: Any], false
            ),
        ] {
            let payload: [String: Any] = [
                "notificationType": type, "notificationUUID": UUID().uuidString, "version": "2.0",
                "signedDate": Handlers.milliseconds(Date()), field: value,
            ]
            let body = Array(try JSONSerialization.data(withJSONObject: ["signedPayload": try Handlers.sign(payload)]))
            let outcome = try await notify(body)
            #expect((outcome.deadLetter == nil) == kept, "\(type): \(String(describing: outcome.deadLetter))")
            #expect(outcome.events.isEmpty)
        }
    }

    /// A RESCIND_CONSENT as Apple signs it: `appData` carrying the download's signed app transaction.
    func rescindConsent(
        _ appTransactionID: String, bundleID: String = "com.example", receiptType: String = "Production",
        uuid: String = UUID().uuidString
    ) throws -> [UInt8] {
        let appTransaction = try Handlers.sign([
            "appTransactionId": appTransactionID, "bundleId": bundleID, "appAppleId": 1234,
            "receiptType": receiptType, "originalPurchaseDate": Handlers.milliseconds(Date()),
            "signedDate": Handlers.milliseconds(Date()),
        ])
        let payload: [String: Any] = [
            "notificationType": "RESCIND_CONSENT", "notificationUUID": uuid, "version": "2.0",
            "signedDate": Handlers.milliseconds(Date()),
            "appData": [
                "appAppleId": 1234, "bundleId": "com.example", "environment": "Production",
                "signedAppTransactionInfo": appTransaction,
            ] as [String: Any],
        ]
        return Array(try JSONSerialization.data(withJSONObject: ["signedPayload": try Handlers.sign(payload)]))
    }

    @Test(
        "a parent's rescinded consent reaches the results topic keyed by the download's app transaction id, once; a nested app transaction of another app or environment is refused"
    )
    func consentRescinded() async throws {
        let uuid = UUID().uuidString
        let outcome = try await notify(try rescindConsent("704289572311", uuid: uuid))
        let event = try #require(outcome.event)
        #expect(event["type"] as? String == "receipt.consent_rescinded")
        #expect(event["app_transaction_id"] as? String == "704289572311")
        #expect(event["bundle_id"] as? String == "com.example" && event["environment"] as? String == "Production")
        #expect(event["notification_id"] as? String == uuid)
        #expect(outcome.headers["ce_type"] == "receipt.consent_rescinded")
        if case .publish(let records) = outcome { #expect(records.first?.key == "704289572311") }
        // Apple's retry of the same notification: the same event again, never a second one.
        #expect(
            try await notify(try rescindConsent("704289572311", uuid: uuid)).event?["event_id"] as? String
                == event["event_id"] as? String)
        for hostile in [
            try rescindConsent("1", bundleID: "com.stranger"), try rescindConsent("2", receiptType: "Sandbox"),
        ] {
            let refused = try await notify(hostile)
            #expect(refused.events.isEmpty)
            #expect(refused.deadLetter?.reason == .malformedJob)
        }
    }

    @Test("a forged notification, or one for a bundle no app has, is dead-lettered, never acted on")
    func forged() async throws {
        try await grant("7000", order: "o7")
        var body = try Handlers.notification("REFUND", transaction: Handlers.transaction("7000"))
        body[body.count - 10] = body[body.count - 10] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(try await notify(body).deadLetter?.reason == .malformedJob)
        let stranger = try Handlers.notification(
            "REFUND", transaction: Handlers.transaction("7000"), bundleID: "com.stranger")
        #expect(try await notify(stranger).deadLetter?.reason == .malformedJob)
        apple.verified(Handlers.proof("again-7000"), transactionID: "7000")
        let again = try await Handlers.run(
            jobs, Handlers.job("job-o7", order: "o7", proof: ["receipt": Handlers.proof("proof-7000")]))
        #expect(again.event?["decision"] as? String == "grant", "nothing was revoked")
    }
}
