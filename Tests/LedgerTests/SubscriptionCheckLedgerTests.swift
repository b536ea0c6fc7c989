import Foundation
import Testing
import Vocabulary

@testable import Ledger

/// What the subscription status checks read, on both ledgers: a subscription is watched from its grant by a job,
/// and is overdue once its period (or grace period) ended with nothing heard since.
@Suite("Overdue subscriptions in the ledger, SQLite and PostgreSQL", .timeLimit(.minutes(1)))
struct SubscriptionCheckLedgerTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    /// Grants `original`'s period from `start` for `days` days to `order` by a job.
    static func grant(
        _ ledger: any Ledger, order: String, original: String, transaction: String? = nil, days: Double,
        from start: Date = start
    ) async throws {
        let transaction = transaction ?? original
        let claim = GrantClaim(
            orderID: order, transactionID: transaction,
            purchaseID: .billingPeriod(webOrderLineItemID: "line-\(transaction)"), userID: "player", productID: "vip",
            originalTransactionID: original,
            subscriptionPeriod: DateInterval(start: start, end: start.addingTimeInterval(days * 86_400)))
        let event = StoredEvent(
            eventID: "g-\(transaction)", type: "receipt.granted", time: "", key: order, json: Array("{}".utf8))
        let outcome = try await ledger.record(
            Decision(
                key: DecisionKey(app: .defaultApp, jobID: "job-\(transaction)", fingerprint: "f"), grant: claim,
                event: event))
        #expect(outcome == .recorded)
    }

    static func overdue(_ ledger: any Ledger, at date: Date, limit: Int = 10) async throws -> [String] {
        try await ledger.overdueSubscriptions(
            app: .defaultApp, endedBefore: date, askedBefore: date.addingTimeInterval(-86_400), limit: limit
        ).map { "\($0.originalTransactionID):\($0.status)" }
    }

    static func change(_ original: String, status: SubscriptionStatus, at date: Date, expires: Date, grace: Date? = nil)
        -> NotificationChange
    {
        NotificationChange(
            id: "n-\(original)-\(status)-\(date.timeIntervalSince1970)", app: .defaultApp, environment: .production,
            kind: .subscription(
                SubscriptionChange(
                    originalTransactionID: original,
                    state: SubscriptionState(
                        status: status, expiresAt: expires, gracePeriodExpiresAt: grace, autoRenew: true,
                        autoRenewProductID: "vip", changedAt: date),
                    renewal: nil)))
    }

    @Test(
        "a billing issue a job's grant to a new order ended: Apple's BILLING_RECOVERY is said to the subscription's order, a plain renewal of the period is not",
        arguments: Backend.allCases)
    func recoveryGrantedByAJob(backend: Backend) async throws {
        let ledger = try await backend.open()
        let day = 86_400.0
        let end = Self.start.addingTimeInterval(30 * day)
        try await Self.grant(ledger, order: "o4", original: "400", days: 30)
        let issue = Self.change("400", status: .billingRetry, at: end, expires: end)
        _ = try await ledger.apply(issue) { holder in
            StoredEvent(eventID: "issue", type: "t", time: "", key: holder.grant.orderID, json: [])
        }
        // The retried payment bought the next period; the game presented it for a new order first.
        try await Self.grant(
            ledger, order: "o4-new", original: "400", transaction: "401", days: 30, from: end.addingTimeInterval(day))
        func renewal(recovery: Bool, id: String, after seconds: TimeInterval) -> NotificationChange {
            var change = Self.change(
                "400", status: .active, at: end.addingTimeInterval(day + seconds),
                expires: end.addingTimeInterval(31 * day))
            change.id = id
            guard case .subscription(var subscription) = change.kind else { return change }
            subscription.renewal = .init(
                purchaseID: .billingPeriod(webOrderLineItemID: "line-401"), transactionID: "401", productID: "vip",
                quantity: 1, eventID: "renewal-401")
            subscription.recovery = recovery
            change.kind = .subscription(subscription)
            return change
        }
        func published(_ change: NotificationChange) async throws -> String? {
            let record = try await ledger.apply(change) { holder in
                StoredEvent(
                    eventID: change.id, type: "t", time: "", key: holder.grant.orderID,
                    json: Array((holder.stateOnly ? "state" : "credit").utf8))
            }
            guard case .recorded(let event?, _) = record else { return nil }
            return event.key + ":" + String(decoding: event.json, as: UTF8.self)
        }
        #expect(try await published(renewal(recovery: false, id: "plain", after: 60)) == nil, "the job's grant said it")
        #expect(try await published(renewal(recovery: true, id: "recovered", after: 120)) == "o4:state")
        await ledger.close()
    }

    @Test(
        "a subscription granted by a job is overdue once its period ended with nothing heard; oldest first, at most the limit; a consumable never",
        arguments: Backend.allCases)
    func watchedFromTheGrant(backend: Backend) async throws {
        let ledger = try await backend.open()
        try await Self.grant(ledger, order: "a", original: "100", days: 30)
        try await Self.grant(ledger, order: "b", original: "200", days: 7)
        #expect(
            try await ledger.record(
                jobID: "coins", claim: .grant(orderID: "c", transactionID: "300"), event: Data("{}".utf8)) == .recorded)
        let day = 86_400.0
        #expect(try await Self.overdue(ledger, at: Self.start.addingTimeInterval(6 * day)).isEmpty)
        #expect(try await Self.overdue(ledger, at: Self.start.addingTimeInterval(8 * day)) == ["200:active"])
        #expect(
            try await Self.overdue(ledger, at: Self.start.addingTimeInterval(31 * day)) == ["200:active", "100:active"])
        #expect(try await Self.overdue(ledger, at: Self.start.addingTimeInterval(31 * day), limit: 1) == ["200:active"])
        // Expired; then the player subscribes again (the same subscription, a new order): watched again.
        let end = Self.start.addingTimeInterval(7 * day)
        _ = try await ledger.apply(Self.change("200", status: .expired, at: end, expires: end)) { _ in nil }
        #expect(try await Self.overdue(ledger, at: Self.start.addingTimeInterval(20 * day)) == [])
        try await Self.grant(
            ledger, order: "b-again", original: "200", transaction: "201", days: 7,
            from: Self.start.addingTimeInterval(10 * day))
        #expect(try await Self.overdue(ledger, at: Self.start.addingTimeInterval(16 * day)).isEmpty)
        #expect(try await Self.overdue(ledger, at: Self.start.addingTimeInterval(18 * day)) == ["200:active"])
        await ledger.close()
    }

    @Test(
        "what a notification says ends the wait: expired never again; a grace period once it ended; one asked of Apple not again for a day, whatever it said",
        arguments: Backend.allCases)
    func notificationsAnswerIt(backend: Backend) async throws {
        let ledger = try await backend.open()
        let day = 86_400.0
        let end = Self.start.addingTimeInterval(7 * day)
        for original in ["1", "2", "3"] {
            try await Self.grant(ledger, order: "o\(original)", original: original, days: 7)
        }
        _ = try await ledger.apply(Self.change("1", status: .expired, at: end, expires: end)) { _ in nil }
        _ = try await ledger.apply(
            Self.change("2", status: .gracePeriod, at: end, expires: end, grace: end.addingTimeInterval(3 * day))
        ) { _ in nil }
        _ = try await ledger.apply(Self.change("3", status: .billingRetry, at: end, expires: end)) { _ in nil }
        let soon = end.addingTimeInterval(day / 2)
        #expect(try await Self.overdue(ledger, at: soon) == ["3:billing_retry"])
        // Asked: not again for a day, whatever Apple said (still in billing retry).
        try await ledger.subscriptionAsked(
            app: .defaultApp, environment: .production, originalTransactionID: "3", at: soon)
        #expect(try await Self.overdue(ledger, at: soon.addingTimeInterval(3_600)).isEmpty)
        // Its news comes after the ask (recovered for a week): asked again once that period ends.
        let recovered = end.addingTimeInterval(day)
        _ = try await ledger.apply(
            Self.change("3", status: .active, at: recovered, expires: recovered.addingTimeInterval(2 * day))
        ) { _ in nil }
        #expect(try await Self.overdue(ledger, at: recovered.addingTimeInterval(day)).isEmpty)
        let later = end.addingTimeInterval(4 * day)
        #expect(Set(try await Self.overdue(ledger, at: later)) == ["2:grace_period", "3:active"])
        await ledger.close()
    }

    @Test(
        "a subscription credited before its job is watched from the job's tie: overdue once its period ended",
        arguments: Backend.allCases)
    func watchedFromTheTie(backend: Backend) async throws {
        let ledger = try await backend.open()
        _ = try await ledger.apply(PurchaseLifeLedgerTests.reported("700", due: Self.start), event: { _ in nil })
        _ = try await ledger.creditUnclaimed(now: Self.start, limit: 10)
        let period = DateInterval(start: Self.start, end: Self.start.addingTimeInterval(30 * 86_400))
        let claim = GrantClaim(
            orderID: "shop-7", transactionID: "700", userID: "player", productID: "vip", originalTransactionID: "700",
            subscriptionPeriod: period)
        let tied = try await ledger.record(
            Decision(
                key: DecisionKey(app: .defaultApp, jobID: "job-700", fingerprint: "f"), grant: claim,
                event: StoredEvent(eventID: "e-700", type: "receipt.granted", time: "", key: "shop-7", json: []),
                creditAnswer: { id, _ in
                    StoredEvent(eventID: id, type: "receipt.granted", time: "", key: "shop-7", json: Array("{}".utf8))
                }))
        guard case .tied(let answer) = tied else {
            Issue.record("not tied: \(tied)")
            return
        }
        #expect(answer.eventID == "credit-700")
        #expect(try await Self.overdue(ledger, at: period.end.addingTimeInterval(-60)).isEmpty)
        #expect(try await Self.overdue(ledger, at: period.end.addingTimeInterval(60)) == ["700:active"])
        await ledger.close()
    }
}
