@testable import Flows
import Foundation
import Ledger
import Messaging
import Synchronization
import Testing
import Vocabulary

/// A round of status checks asks every overdue subscription it can: one environment Apple does not answer is left
/// for the next round without holding the other's players' news, and a broker that takes nothing ends the round.
@Suite("Subscription status checks, round by round")
struct SubscriptionStatusChecksTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    /// A ledger with a Sandbox subscription overdue first, then a Production one, and the checks over it.
    static func overdueInBothEnvironments() async throws -> (LedgerEngine, SubscriptionStatusChecks, AppleApp) {
        let ledger = try LedgerEngine.sqlite(path: ":memory:")
        for (original, environment, days) in [("100", AppleEnvironment.sandbox, 1.0), ("200", .production, 2.0)] {
            let claim = GrantClaim(
                orderID: "order-\(original)", transactionID: original,
                purchaseID: .billingPeriod(webOrderLineItemID: "line-\(original)"), environment: environment,
                userID: "player", productID: "vip", originalTransactionID: original,
                subscriptionPeriod: DateInterval(start: start, end: start.addingTimeInterval(days * 86_400)))
            let event = StoredEvent(
                eventID: "g-\(original)", type: "receipt.granted", time: "", key: claim.orderID, json: Array("{}".utf8))
            let key = DecisionKey(app: .defaultApp, jobID: "job-\(original)", fingerprint: "f")
            #expect(try await ledger.record(Decision(key: key, grant: claim, event: event)) == .recorded)
        }
        let apps = try Handlers.apps(FakeApple(), sandbox: true)
        let checks = SubscriptionStatusChecks(
            apps: apps, ledger: ledger, retry: RetryPolicy(), produce: { _ in }, topic: "notifications",
            settings: .init(interval: .milliseconds(1), after: 0, batch: 10), metrics: WorkerMetrics(),
            logger: Handlers.logger, holder: "replica-a")
        return (ledger, checks, apps.defaultApp)
    }

    @Test("Sandbox's Apple not answering: the Production subscription after it is asked, and Sandbox's next round")
    func oneEnvironmentDown() async throws {
        let (ledger, checks, app) = try await Self.overdueInBothEnvironments()
        let asked = Mutex<[String]>([])
        let now = Self.start.addingTimeInterval(10 * 86_400)
        await checks.check(app, now: now) { subscription in
            asked.withLock { $0.append(subscription.originalTransactionID) }
            return subscription.environment == .sandbox
                ? SubscriptionStatusChecks.Asked(outcome: "failed") : .init(outcome: "produced")
        }
        #expect(asked.withLock { $0 } == ["100", "200"])
        // Sandbox's is still overdue for the next round; Production's was asked and waits a day.
        let left = try await ledger.overdueSubscriptions(
            app: .defaultApp, endedBefore: now, askedBefore: now.addingTimeInterval(-86_400), limit: 10)
        #expect(left.map(\.originalTransactionID) == ["100"])
    }

    @Test("a broker that takes nothing ends the round: the rest is asked next round")
    func brokerDown() async throws {
        let (ledger, checks, app) = try await Self.overdueInBothEnvironments()
        let asked = Mutex<[String]>([])
        let now = Self.start.addingTimeInterval(10 * 86_400)
        await checks.check(app, now: now) { subscription in
            asked.withLock { $0.append(subscription.originalTransactionID) }
            return SubscriptionStatusChecks.Asked(outcome: "failed", endsRound: true)
        }
        #expect(asked.withLock { $0 } == ["100"])
        let left = try await ledger.overdueSubscriptions(
            app: .defaultApp, endedBefore: now, askedBefore: now.addingTimeInterval(-86_400), limit: 10)
        #expect(left.map(\.originalTransactionID) == ["100", "200"])
    }
}
