@testable import Events
@testable import Flows
import Foundation
import Ledger
@testable import ReceiptWorker
import Runtime
import Testing
import Messaging
import Observability
import Vocabulary

/// A notification this process's receiver verified is processed from the receiver's result, not verified a
/// second time; any other bytes are verified as before.
@Suite("Notifications verified by this process's receiver")
struct RecentlyVerifiedNotificationsTests {
    let apple = FakeApple()
    let ledger: LedgerEngine
    let apps: AppleApps
    let jobs: JobHandler
    let recent = RecentlyVerifiedNotifications(capacity: 4)
    let metrics = WorkerMetrics()
    let notifications: NotificationHandler

    init() throws {
        ledger = try Handlers.ledger()
        apps = try Handlers.apps(apple)
        jobs = Handlers.jobs(apps, ledger: ledger)
        notifications = Handlers.notifications(apps, ledger: ledger, metrics: metrics, recentlyVerified: recent)
    }

    /// A genuine refund of transaction `id`, as the receiver verified it.
    func verifiedRefund(_ id: String) throws -> AppleNotification {
        let body = try Handlers.notification("REFUND", transaction: Handlers.transaction(id))
        guard case .verified(let notification) = AppleNotification.verify(body: Data(body), apps: apps) else {
            Issue.record("the test's refund does not verify")
            throw CancellationError()
        }
        return notification
    }

    @Test("the receiver's result is taken for exactly the bytes it verified, once; other bytes are verified")
    func takenForTheSameBytesOnly() async throws {
        apple.verified(Handlers.proof("p"), transactionID: "7000")
        let granted = try await Handlers.run(
            jobs, Handlers.job("j1", order: "o1", proof: ["receipt": Handlers.proof("p")]))
        #expect(granted.event?["decision"] as? String == "grant")
        // Remembered under bytes that verify as nothing: processing them shows the signatures were not checked.
        let unverifiable = Array(#"{"signedPayload":"remembered-by-this-receiver"}"#.utf8)
        recent.remember(value: unverifiable, try verifiedRefund("7000"))

        // One byte more is another record: verified, and refused.
        let altered = try await Handlers.run(notifications, unverifiable + [0x20], topic: "notifications")
        #expect(altered.deadLetter?.reason == .malformedJob)
        // As long, with the same end, another byte before it: refused too, and the real record's result stays.
        var lookalike = unverifiable
        lookalike[2] = UInt8(ascii: "S")
        let forged = try await Handlers.run(notifications, lookalike, topic: "notifications")
        #expect(forged.deadLetter?.reason == .malformedJob)
        let revoked = try await Handlers.run(notifications, unverifiable, topic: "notifications")
        #expect(revoked.event?["type"] as? String == "receipt.revoked" && revoked.event?["order_id"] as? String == "o1")
        // Taken once: the same bytes delivered again are verified like any record.
        let again = try await Handlers.run(notifications, unverifiable, topic: "notifications")
        #expect(again.deadLetter?.reason == .malformedJob)
        // What an operator reads: one taken from the receiver, three verified again.
        #expect(metrics.notificationsTakenFromReceiver.value == 1 && metrics.notificationsVerifiedAgain.value == 3)
    }

    @Test("at most its capacity is kept, the oldest leaving first")
    func bounded() throws {
        let refund = try verifiedRefund("7100")
        for index in 0..<10 { recent.remember(value: Array("record-\(index)".utf8), refund) }
        #expect(recent.count == 4)
        #expect(recent.take(value: Array("record-5".utf8)) == nil)
        #expect(recent.take(value: Array("record-9".utf8)) != nil)
        #expect(recent.take(value: Array("record-9".utf8)) == nil)
    }
}
