import AppleVerification
import Flows
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
        var produce: (@Sendable (OutboundMessage) async throws -> Void)?
        if let producer { produce = { message in _ = try await producer.send(message) } }
        let replay = HistoryReplay(
            apps: apps, retry: configuration.retry, topic: configuration.topics.notifications, produce: produce)
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
                let outcome = await replay.replay(api, environment: environment, from: since, to: until)
                for reason in outcome.rejections { complain("a notification does not verify: \(reason)") }
                if let failure = outcome.failure { complain("\(environment.rawValue): \(failure)") }
                failed = failed || outcome.failure != nil || !outcome.rejections.isEmpty
                let counts = outcome.counts
                emit(
                    "\(lane): \(counts.read) notification(s) read, \(counts.produced) produced"
                        + (dryRun ? " (dry run)" : "") + ", \(counts.skipped) skipped (environment not accepted),"
                        + " \(counts.rejected) not verified")
                for (type, count) in counts.byType.sorted(by: { $0.key < $1.key }) { emit("  \(type): \(count)") }
            }
        }
        await producer?.close()
        return failed ? 1 : 0
    }
}
