import AppleVerification
package import Foundation
package import LedgerDomain
import Lifecycle
import Messaging
package import Observability
import Synchronization
package import Vocabulary

/// Apple's history swept on a schedule, so a notification Apple could not deliver (a receiver down, a wrong
/// Ingress, a deploy answering 400) is handled without anyone running `notifications backfill`.
///
/// Every `notifications.sweep_interval_ms`, per app with an App Store Server API key, one replica (the holder
/// of the app's lease in the ledger) asks Get Notification History for the last `notifications.sweep_window_ms`
/// with `onlyFailures`; and, when the ledger has handled no notification for `notifications.sweep_gap_ms` (the
/// receiver silent for longer than usual), for every notification since then. What it finds goes onto the
/// notifications topic as a delivery would ([HistoryReplay]): handled once, deduplicated by its UUID. Its calls
/// use Get Notification History's own rate lane: a sweep never takes a job's place at Apple.
package struct NotificationSweeper: Sendable {
    package struct Settings: Sendable, Equatable {
        var interval: Duration
        var window: TimeInterval
        var gap: TimeInterval

        package init(interval: Duration, window: TimeInterval, gap: TimeInterval) {
            self.interval = interval
            self.window = window
            self.gap = gap
        }
    }

    /// One app's sweep, as the lease's state remembers it between replicas.
    package struct State: Codable, Equatable {
        /// Until when every notification (not only failures) was read.
        var fullUntil: Date?
        /// By environment (`Production`, `Sandbox`), the start of a full read that stopped short (a page Apple did
        /// not answer, a record the broker refused): read again from there at the next round. Its first pages were
        /// handled, so the ledger no longer looks silent, and the rest of the silence would never be read.
        var unfinishedFrom: [String: Date]?

        package init(fullUntil: Date? = nil, unfinishedFrom: [String: Date]? = nil) {
            self.fullUntil = fullUntil
            self.unfinishedFrom = unfinishedFrom
        }
    }

    /// What a sweep asks Apple for: the failures of the rolling window, and the whole gap when there is one.
    package struct Plan: Equatable {
        var failures: (start: Date, end: Date)
        var full: (start: Date, end: Date)?

        package static func == (lhs: Plan, rhs: Plan) -> Bool {
            lhs.failures == rhs.failures && lhs.full?.start == rhs.full?.start && lhs.full?.end == rhs.full?.end
        }
    }

    package let apps: AppleApps
    package let ledger: any LeaseStore
    package let replay: HistoryReplay
    package let settings: Settings
    package let metrics: WorkerMetrics
    package let logger: Logger
    /// This process, as lease holders are named.
    package let holder: String

    package init(
        apps: AppleApps, ledger: any LeaseStore, replay: HistoryReplay, settings: Settings, metrics: WorkerMetrics,
        logger: Logger, holder: String
    ) {
        self.apps = apps
        self.ledger = ledger
        self.replay = replay
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        self.holder = holder
    }

    /// What this replica produced and the ledger may not have handled yet: not produced again by the next round.
    package final class Produced: Sendable {
        private let ids = Mutex<[String: Date]>([:])

        package init() {}

        package func contains(_ id: String) -> Bool { ids.withLock { $0[id] != nil } }

        /// Remembers `id`; forgets what is older than `keep` (it was handled, or its window is past).
        package func add(_ id: String, now: Date = Date(), keep: TimeInterval) {
            ids.withLock { ids in
                ids[id] = now
                if ids.count > 10_000 { ids = ids.filter { now.timeIntervalSince($0.value) < keep } }
            }
        }
    }

    /// Apple keeps 180 days of history: no window starts before.
    package static let historyKept: TimeInterval = 180 * 86_400

    /// The sweep's plan at `now`: the rolling window's failures; and everything since the ledger's newest
    /// notification (or the last full sweep, whichever is later) when that is `gap` ago or more.
    package static func plan(now: Date, newestHandled: Date?, state: State, settings: Settings) -> Plan {
        let oldest = now.addingTimeInterval(-historyKept + 60)
        let failures = (start: max(now.addingTimeInterval(-settings.window), oldest), end: now)
        let heardUntil = [newestHandled, state.fullUntil].compactMap { $0 }.max()
        guard now.timeIntervalSince(heardUntil ?? .distantPast) >= settings.gap else {
            return Plan(failures: failures, full: nil)
        }
        let start = max(heardUntil ?? now.addingTimeInterval(-settings.window), oldest)
        return Plan(failures: failures, full: (start: start, end: now))
    }

    /// The full read of `environment` this round: from where its last one stopped short, else the plan's.
    package static func fullRead(of environment: AppleEnvironment, plan: Plan, state: State, now: Date) -> (
        start: Date, end: Date
    )? {
        guard let unfinished = state.unfinishedFrom?[environment.rawValue] else { return plan.full }
        return (start: max(unfinished, now.addingTimeInterval(-historyKept + 60)), end: now)
    }

    /// One round: each app whose lease this replica holds is swept.
    package func round(now: Date = Date()) async {
        for app in apps.all {
            guard let api = app.api else { continue }
            await sweep(app, api: api, now: now)
        }
    }

    private func sweep(_ app: AppleApp, api: AppStoreServerAPIClient, now: Date) async {
        let lease = "notification-sweep/\(app.name)"
        let held: String?
        do {
            held = try await ledger.acquireLease(lease, holder: holder, roundsEvery: settings.interval, now: now)
        } catch {
            metrics.sweep(app: app.name, outcome: "failed").increment()
            logger.warning("the notification sweep cannot take its lease", ["app": app.name, "error": "\(error)"])
            return
        }
        guard let stateText = held else {
            metrics.sweep(app: app.name, outcome: "elsewhere").increment()
            return
        }
        var state = (try? JSONDecoder.withSeconds.decode(State.self, from: Data(stateText.utf8))) ?? State()
        let newest = try? await ledger.newestNotificationHandled()
        let plan = Self.plan(now: now, newestHandled: newest, state: state, settings: settings)
        var environments: [AppleEnvironment] = [.production]
        if api.configuration.allowSandbox { environments.append(.sandbox) }
        var failed = false
        var unfinished: [String: Date] = [:]
        var readInFull = false
        for environment in environments {
            let failures = await replay.replay(
                api, environment: environment, from: plan.failures.start, to: plan.failures.end, onlyFailures: true)
            record(failures, app: app.name, environment: environment, found: "failed_delivery")
            failed = failed || failures.failure != nil
            if let full = Self.fullRead(of: environment, plan: plan, state: state, now: now) {
                readInFull = true
                let everything = await replay.replay(api, environment: environment, from: full.start, to: full.end)
                record(everything, app: app.name, environment: environment, found: "gap")
                // Stopped short: this environment is read again from the same start, whatever the ledger heard.
                if everything.failure != nil { unfinished[environment.rawValue] = full.start }
            }
        }
        metrics.sweep(app: app.name, outcome: failed || !unfinished.isEmpty ? "failed" : "swept").increment()
        guard readInFull else { return }
        // Heard until the planned read's end: an environment that stopped short resumes from its own start.
        if let full = plan.full { state.fullUntil = full.end }
        state.unfinishedFrom = unfinished.isEmpty ? nil : unfinished
        if let data = try? JSONEncoder.withSeconds.encode(state) {
            try? await ledger.recordLeaseState(lease, holder: holder, state: String(decoding: data, as: UTF8.self))
        }
    }

    private func record(_ outcome: HistoryReplay.Report, app: String, environment: AppleEnvironment, found: String) {
        metrics.sweptNotifications(app: app, found: found).increment(by: outcome.counts.produced)
        metrics.sweptNotifications(app: app, found: "rejected").increment(by: outcome.counts.rejected)
        for reason in outcome.rejections {
            logger.warning("a swept notification does not verify", ["app": app, "reason": reason])
        }
        if let failure = outcome.failure {
            logger.warning(
                "the notification sweep stopped short: the next round reads the window again",
                ["app": app, "environment": environment.rawValue, "error": failure])
        } else if outcome.counts.produced > 0 {
            logger.notice(
                found == "gap"
                    ? "the notification sweep read a silent stretch of Apple's history"
                    : "the notification sweep found notifications Apple could not deliver",
                [
                    "app": app, "environment": environment.rawValue, "produced": String(outcome.counts.produced),
                    "types": outcome.counts.byType.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                        .joined(separator: ","),
                ])
        }
    }
}

extension JSONDecoder {
    package static var withSeconds: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }
}

extension JSONEncoder {
    package static var withSeconds: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        return encoder
    }
}
