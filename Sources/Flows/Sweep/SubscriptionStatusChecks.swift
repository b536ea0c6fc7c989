import AppleVerification
import Events
package import Foundation
package import LedgerDomain
import Lifecycle
package import Messaging
package import Observability
import Vocabulary

/// Subscriptions whose news never came, asked of Apple. A period ends and Apple sends `DID_RENEW`, `EXPIRED` or
/// `DID_FAIL_TO_RENEW`; when none of them reached the worker (lost for good, or older than the sweep's window),
/// the grant service would keep the player's access on, or off, for ever.
///
/// Every `subscriptions.status_check_interval_ms`, per app with an App Store Server API key, the holder of the
/// app's lease reads from the ledger the subscriptions granted here whose period (or grace period) ended more than
/// `subscriptions.status_check_after_ms` ago with nothing heard since (those in billing retry once a day), asks
/// Get All Subscription Statuses for each, and puts Apple's signed answer on the notifications topic
/// (``SubscriptionStatusRecord``): the notification flow acts on it as on the notification Apple would have sent,
/// once. Its calls take their own rate lane: jobs never wait behind them.
package struct SubscriptionStatusChecks: Sendable {
    package struct Settings: Sendable {
        var interval: Duration
        var after: TimeInterval
        var batch: Int
        /// A subscription asked is not asked again for a day, whatever Apple said: one in billing retry (Apple
        /// retries for up to 60 days), one whose answer changes nothing here (a refund never heard of).
        var askAgainAfter: TimeInterval = 86_400

        package init(interval: Duration, after: TimeInterval, batch: Int, askAgainAfter: TimeInterval = 86_400) {
            self.interval = interval
            self.after = after
            self.batch = batch
            self.askAgainAfter = askAgainAfter
        }
    }

    package let apps: AppleApps
    package let ledger: any SubscriptionCheckStore & LeaseStore & PurchaseStateStore
    package let retry: RetryPolicy
    package let produce: @Sendable (OutboundMessage) async throws -> Void
    package let topic: String
    package let settings: Settings
    package let metrics: WorkerMetrics
    package let logger: Logger
    package let holder: String

    package init(
        apps: AppleApps, ledger: any SubscriptionCheckStore & LeaseStore & PurchaseStateStore, retry: RetryPolicy,
        produce: @escaping @Sendable (OutboundMessage) async throws -> Void, topic: String, settings: Settings,
        metrics: WorkerMetrics, logger: Logger, holder: String
    ) {
        self.apps = apps
        self.ledger = ledger
        self.retry = retry
        self.produce = produce
        self.topic = topic
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        self.holder = holder
    }

    package func round(now: Date = Date()) async {
        for app in apps.all {
            guard let api = app.api else { continue }
            await check(app, now: now) { subscription in
                subscription.environment == .production || api.configuration.allowSandbox
                    ? await ask(subscription, app: app, api: api) : Asked(outcome: "skipped")
            }
        }
    }

    /// One app's round, each overdue subscription given to `ask`. An environment whose Apple does not answer
    /// (Sandbox down, say) is left for the next round and the other is still asked: one outage must not keep
    /// Production's players' news waiting. A broker that does not take an answer ends the round.
    func check(_ app: AppleApp, now: Date, asking ask: (OverdueSubscription) async -> Asked) async {
        let lease = "subscription-status/\(app.name)"
        let overdue: [OverdueSubscription]
        do {
            guard try await ledger.acquireLease(lease, holder: holder, roundsEvery: settings.interval, now: now) != nil
            else { return }
            overdue = try await ledger.overdueSubscriptions(
                app: app.scope, endedBefore: now.addingTimeInterval(-settings.after),
                askedBefore: now.addingTimeInterval(-settings.askAgainAfter), limit: settings.batch)
        } catch {
            metrics.statusCheck(app: app.name, outcome: "failed").increment()
            logger.warning("overdue subscriptions cannot be read", ["app": app.name, "error": "\(error)"])
            return
        }
        var unanswered: Set<AppleEnvironment> = []
        for subscription in overdue where !unanswered.contains(subscription.environment) {
            let asked = await ask(subscription)
            // Apple or the broker not answering: asked again next round, as if never asked.
            if asked.outcome == "failed" {
                metrics.statusCheck(app: app.name, outcome: asked.outcome).increment()
                if asked.endsRound { return }
                unanswered.insert(subscription.environment)
                continue
            }
            if asked.outcome != "skipped" { metrics.statusCheck(app: app.name, outcome: asked.outcome).increment() }
            // Not decided on a guess: an answer whose signing chain's status is not known yet is asked again next
            // round, as if never asked.
            if asked.outcome == "pending" { continue }
            // Asked (or not to be asked: a Sandbox subscription where Sandbox is off): not again for a day, so the
            // oldest never keep the others waiting; unless the answer renewed it, whose new period is asked about
            // when it ends (the ledger's overdue query).
            try? await ledger.subscriptionAsked(
                app: app.scope, environment: subscription.environment,
                originalTransactionID: subscription.originalTransactionID, at: now)
        }
    }

    /// What came of one ask: the metric's outcome.
    package struct Asked {
        var outcome: String
        /// The broker did not take the answer: nothing more can be produced this round.
        var endsRound = false
    }

    /// Asks Apple for one subscription and produces its answer.
    private func ask(_ subscription: OverdueSubscription, app: AppleApp, api: AppStoreServerAPIClient) async
        -> Asked
    {
        let answer: AppStoreServerAPIClient.SubscriptionStatusAnswer
        do {
            answer = try await retry.retryingApple {
                try await api.subscriptionStatuses(
                    id: subscription.originalTransactionID, environment: subscription.environment, attempts: &$0)
            }
        } catch {
            logger.warning(
                "Get All Subscription Statuses failed: the next round asks again",
                ["app": app.name, "original_transaction_id": subscription.originalTransactionID, "error": "\(error)"])
            return Asked(outcome: "failed")
        }
        guard case .found(let statuses) = answer,
            let status = statuses.first(where: { $0.originalTransactionId == subscription.originalTransactionID })
        else {
            logger.warning(
                "Apple knows no status of a subscription granted here",
                ["app": app.name, "original_transaction_id": subscription.originalTransactionID])
            return Asked(outcome: "unknown")
        }
        let record: OutboundMessage
        let notification: AppleNotification
        switch await SubscriptionStatusRecord.record(status, bundleID: app.bundleID, apps: apps, topic: topic) {
        case .success(let made): (record, notification) = made
        case .failure(let refusal):
            logger.warning(
                refusal.pending
                    ? "Apple's status of a subscription cannot be verified yet: asked again next round"
                    : "Apple's status of a subscription does not verify",
                [
                    "app": app.name, "original_transaction_id": subscription.originalTransactionID,
                    "reason": refusal.reason,
                ])
            return Asked(outcome: refusal.pending ? "pending" : "unknown")
        }
        // An answer handled before (a subscription still in billing retry) is not produced again.
        if (try? await ledger.storedNotification(id: notification.id)) != nil {
            return Asked(outcome: "unchanged")
        }
        do {
            try await produce(record)
        } catch {
            logger.warning("the broker did not take a subscription's status", ["app": app.name, "error": "\(error)"])
            return Asked(outcome: "failed", endsRound: true)
        }
        logger.info(
            "a subscription's overdue news asked of Apple",
            [
                "app": app.name, "original_transaction_id": subscription.originalTransactionID,
                "was": subscription.status.rawValue, "now": notification.type.rawValue,
            ])
        return Asked(outcome: "produced")
    }
}
