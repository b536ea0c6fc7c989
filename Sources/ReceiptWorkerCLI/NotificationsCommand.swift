import AppleVerification
import Foundation
import Kafka
import Observability
import ReceiptWorker

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
        let apple = try WorkerAssembly.appleVerifier(configuration, logger: ToolKafka.logger)
        guard let api = apple.api else {
            throw ConfigurationError(
                key: "apple.api.key_id", reason: "notifications backfill needs the App Store Server API key")
        }
        let dryRun = options.has("--dry-run")
        let producer = dryRun ? nil : try ToolKafka.producer(configuration)
        var environments: [AppleEnvironment] = [.production]
        if configuration.apple.allowSandbox { environments.append(.sandbox) }
        var failed = false
        for environment in environments {
            var pageFailed = false
            var summary: [String: Int] = [:]
            var counts = (read: 0, produced: 0, skipped: 0, rejected: 0)
            var page: String?
            repeat {
                let history: AppStoreServerAPIClient.NotificationHistoryPage
                do {
                    history = try await fetch(api, environment, since, until, page, configuration)
                } catch {
                    complain("\(environment.rawValue): Get Notification History failed: \(error)")
                    failed = true
                    pageFailed = true
                    break
                }
                for signed in history.signedPayloads {
                    counts.read += 1
                    let body = Data("{\"signedPayload\":\(JSONString.quote(signed))}".utf8)
                    switch BackfilledNotification.verify(body: body, verifier: apple.signedData) {
                    case .rejected(let reason):
                        counts.rejected += 1
                        complain("a notification does not verify: \(reason)")
                    case .skipped:
                        counts.skipped += 1
                    case .verified(let record):
                        summary[record.type, default: 0] += 1
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
            } while page != nil && !pageFailed
            // A notification that does not verify is Apple's and ours (a wrong apple.app_apple_id, roots):
            // the run failed to bring it in.
            if counts.rejected > 0 { failed = true }
            emit(
                "\(environment.rawValue): \(counts.read) notification(s) read, \(counts.produced) produced"
                    + (dryRun ? " (dry run)" : "") + ", \(counts.skipped) skipped (environment not accepted),"
                    + " \(counts.rejected) not verified")
            for (type, count) in summary.sorted(by: { $0.key < $1.key }) { emit("  \(type): \(count)") }
        }
        await producer?.close()
        return failed ? 1 : 0
    }

    /// One page, retried on Apple's transient failures as the worker retries (`retry.*`).
    private static func fetch(
        _ api: AppStoreServerAPIClient, _ environment: AppleEnvironment, _ since: Date, _ until: Date, _ page: String?,
        _ configuration: WorkerConfiguration
    ) async throws -> AppStoreServerAPIClient.NotificationHistoryPage {
        var attempts = 0
        while true {
            do {
                return try await api.notificationHistory(
                    environment: environment, start: since, end: until, page: page, attempts: &attempts)
            } catch let error as AppleVerificationError where error.isRetriable {
                guard configuration.retry.mayRetry(afterAttempts: attempts) else { throw error }
                try await Task.sleep(
                    for: configuration.retry.delay(afterAttempts: attempts, retryAfter: error.retryDelay))
            }
        }
    }
}
