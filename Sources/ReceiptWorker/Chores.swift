import AppleVerification
import Flows
import Foundation
import Lifecycle
import LedgerDomain
import Messaging
import Observability

// The chores of a worker, from its configuration, each run every interval: the sweep, the status checks and the
// answers by policy on the replica holding their lease; the unclaimed credits on every replica.

extension ConsumptionPolicyAnswers {
    /// The answers of a worker (nil: no app has a policy that answers).
    static func service(
        _ configuration: WorkerConfiguration, apps: AppleApps, ledger: any Ledger, producer: any MessageSender,
        metrics: WorkerMetrics, logger: Logger, holder: String
    ) -> PeriodicService? {
        let answering = zip(apps.all, configuration.allApps).filter {
            $0.1.consumptionPolicy.answer != .none && $0.0.consumption != nil
        }.map { (app: $0.0, policy: $0.1.consumptionPolicy) }
        guard !answering.isEmpty else { return nil }
        let answers = ConsumptionPolicyAnswers(
            apps: answering, ledger: ledger, produce: { _ = try await producer.send($0) },
            topic: configuration.topics.consumption, metrics: metrics, logger: logger, holder: holder)
        let every = configuration.consumptionPolicyInterval
        return PeriodicService(every: every, after: min(every, .seconds(5))) { await answers.round(every: every) }
    }
}

extension NotificationSweeper {
    /// The sweep of a worker (nil: `notifications.sweep_interval_ms` is 0, or no app has an API key): its first
    /// round a little after start (the topics checked, the group joined), then every interval.
    static func service(
        _ configuration: WorkerConfiguration, apps: AppleApps, ledger: any Ledger, producer: any MessageSender,
        metrics: WorkerMetrics, logger: Logger, holder: String, recentlyVerified: RecentlyVerifiedNotifications? = nil
    ) -> PeriodicService? {
        guard let interval = configuration.sweepInterval, apps.all.contains(where: { $0.api != nil }) else {
            return nil
        }
        let produced = Produced()
        let keep = configuration.sweepWindow.inSeconds
        let replay = HistoryReplay(
            apps: apps, retry: configuration.retry, topic: configuration.topics.notifications,
            produce: { _ = try await producer.send($0) },
            handledBefore: { id in
                if produced.contains(id) { return true }
                return try await ledger.storedNotification(id: id) != nil
            }, produced: { produced.add($0, keep: keep) }, recentlyVerified: recentlyVerified)
        let sweeper = NotificationSweeper(
            apps: apps,
            ledger: ledger, replay: replay,
            settings: Settings(
                interval: interval, window: configuration.sweepWindow.inSeconds, gap: configuration.sweepGap.inSeconds),
            metrics: metrics, logger: logger, holder: holder)
        return PeriodicService(every: interval, after: min(interval, .seconds(10))) { await sweeper.round() }
    }
}

extension SubscriptionStatusChecks {
    /// The checks of a worker (nil: `subscriptions.status_check_interval_ms` is 0, or no app has an API key).
    static func service(
        _ configuration: WorkerConfiguration, apps: AppleApps, ledger: any Ledger, producer: any MessageSender,
        metrics: WorkerMetrics, logger: Logger, holder: String
    ) -> PeriodicService? {
        guard let interval = configuration.statusCheckInterval, apps.all.contains(where: { $0.api != nil }) else {
            return nil
        }
        let checks = SubscriptionStatusChecks(
            apps: apps,
            ledger: ledger, retry: configuration.retry, produce: { _ = try await producer.send($0) },
            topic: configuration.topics.notifications,
            settings: Settings(
                interval: interval, after: configuration.statusCheckAfter.inSeconds,
                batch: configuration.statusCheckBatch),
            metrics: metrics, logger: logger, holder: holder)
        return PeriodicService(every: interval, after: min(interval, .seconds(10))) { await checks.round() }
    }
}
