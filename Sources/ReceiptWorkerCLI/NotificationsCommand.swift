import AppleVerification
import Foundation
import Kafka
import Observability
import ReceiptWorker
import Vocabulary

/// `receipt-worker notifications backfill`: what Apple sent while the receiver was down, from Get
/// Notification History, produced to `topics.notifications` as the receiver would have.
enum NotificationsCommand {
    static let help = """
        usage: receipt-worker notifications backfill [--config FILE] [--set key=value]... --since TIME
                                                     [--until TIME] [--dry-run]

        Asks Apple's Get Notification History for every notification (delivered or not) from --since
        (within the last 180 days: Apple keeps no more) to --until (RFC 3339; default now), in Production and, with apple.allow_sandbox=true, in Sandbox;
        verifies each as the receiver does and produces it to topics.notifications. Processing publishes
        nothing twice: a notification handled before publishes its first event again, with the same
        event_id. --dry-run reads and verifies, produces nothing. Prints a summary per environment and type.
        Needs the App Store Server API key (apple.api.*) and apple.app_apple_id for Production.

        Exit codes: 0 done; 1 Apple or the broker failed (what was produced stays; run it again: it is
        safe); 2 usage or configuration error.
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        guard arguments.first == "backfill" else { throw UsageError("notifications needs a subcommand: backfill") }
        let options = try Options(
            Array(arguments.dropFirst()), valued: Options.configurationOptions.union(["--since", "--until"]),
            flags: ["--dry-run"])
        guard let sinceText = options.value("--since") else { throw UsageError("--since is required") }
        guard let since = RFC3339.parse(sinceText) else { throw UsageError("--since must be an RFC 3339 time") }
        let until =
            try options.value("--until").map {
                guard let time = RFC3339.parse($0) else { throw UsageError("--until must be an RFC 3339 time") }
                return time
            } ?? Date()
        guard since < until else { throw UsageError("--since must be before --until") }
        // Apple answers 4000012 for a start more than 180 days back: its history keeps no more.
        guard since > Date(timeIntervalSinceNow: -180 * 86_400 + 60) else {
            throw UsageError("--since must be within the last 180 days: Apple keeps no older notification history")
        }
        let configuration = try options.configuration(purpose: .worker)
        let apps = try WorkerAssembly.appleApps(configuration, logger: ToolKafka.logger)
        guard apps.all.contains(where: { $0.api != nil }) else {
            throw ConfigurationError(
                .missingKey, key: "apple.api.key_id",
                reason: "notifications backfill needs the App Store Server API key")
        }
        let dryRun = options.has("--dry-run")
        let producer = dryRun ? nil : try ToolKafka.producer(configuration)
        var failed = false
        // Every app's history: each app's token (its bundle id) reads that app's notifications only.
        for (app, settings) in zip(apps.all, configuration.allApps) {
            guard let api = app.api else {
                complain("app \(app.name): no App Store Server API key: its history is not read")
                failed = true
                continue
            }
            var environments: [AppleEnvironment] = [.production]
            if settings.allowSandbox { environments.append(.sandbox) }
            for environment in environments {
                let lane = apps.all.count > 1 ? "\(app.name) \(environment.rawValue)" : environment.rawValue
                let outcome = await backfill(
                    api, environment, since, until, apps: apps, producer: producer, configuration)
                failed = failed || outcome.failed
                let counts = outcome.counts
                emit(
                    "\(lane): \(counts.read) notification(s) read, \(counts.produced) produced"
                        + (dryRun ? " (dry run)" : "") + ", \(counts.skipped) skipped (environment not accepted),"
                        + " \(counts.rejected) not verified")
                for (type, count) in outcome.summary.sorted(by: { $0.key < $1.key }) { emit("  \(type): \(count)") }
            }
        }
        await producer?.close()
        return failed ? 1 : 0
    }

    /// One app's history of one environment, every page, each notification verified and (unless a dry run)
    /// produced. A page that cannot be read, a notification that does not verify (Apple's and ours: a wrong
    /// app id, roots) or one the broker does not take fails the run.
    private static func backfill(
        _ api: AppStoreServerAPIClient, _ environment: AppleEnvironment, _ since: Date, _ until: Date,
        apps: AppleApps, producer: KafkaProducer?, _ configuration: WorkerConfiguration
    ) async -> (failed: Bool, counts: (read: Int, produced: Int, skipped: Int, rejected: Int), summary: [String: Int]) {
        var failed = false
        var summary: [String: Int] = [:]
        var counts = (read: 0, produced: 0, skipped: 0, rejected: 0)
        var page: String?
        repeat {
            let history: AppStoreServerAPIClient.NotificationHistoryPage
            do {
                history = try await fetch(api, environment, since, until, page, configuration)
            } catch {
                complain("\(environment.rawValue): Get Notification History failed: \(error)")
                return (true, counts, summary)
            }
            for signed in history.signedPayloads {
                counts.read += 1
                let body = Data("{\"signedPayload\":\(JSONString.quote(signed))}".utf8)
                switch BackfilledNotification.verify(body: body, apps: apps) {
                case .rejected(let reason):
                    counts.rejected += 1
                    failed = true
                    complain("a notification does not verify: \(reason)")
                case .skipped:
                    counts.skipped += 1
                case .verified(let record):
                    summary[record.type.rawValue, default: 0] += 1
                    guard let producer else { continue }
                    do {
                        _ = try await producer.send(
                            KafkaProducerMessage(
                                topic: configuration.topics.notifications, key: Array(record.key.utf8),
                                value: Array(body), headers: record.headers))
                        counts.produced += 1
                    } catch {
                        complain("the broker did not take a notification: \(error)")
                        failed = true
                    }
                }
            }
            page = history.nextPage
        } while page != nil
        return (failed, counts, summary)
    }

    /// One page, retried on Apple's transient failures as the worker retries (`retry.*`).
    private static func fetch(
        _ api: AppStoreServerAPIClient, _ environment: AppleEnvironment, _ since: Date, _ until: Date, _ page: String?,
        _ configuration: WorkerConfiguration
    ) async throws -> AppStoreServerAPIClient.NotificationHistoryPage {
        // Every round counts, also one an open circuit answered without a call: a page waits retry.max_attempts
        // rounds at most (this loop waited out the breaker's cooldowns before).
        try await configuration.retry.retryingApple {
            try await api.notificationHistory(
                environment: environment, start: since, end: until, page: page, attempts: &$0)
        }
    }
}
