package import AppleVerification
package import Events
import Foundation
public import Observability
package import Synchronization
import Vocabulary

/// The worker's Prometheus metrics (README, "Metrics"). Counters on the hot path are resolved once here;
/// state owned elsewhere (jobs in flight, partitions, the circuit) is read at scrape time by ``Worker``.
public final class WorkerMetrics: Sendable {
    public let registry: MetricsRegistry
    package let jobsConsumed: Counter
    package let appleRetries: Counter
    package let replayedResults: Counter
    /// Where a job's time goes besides Apple: `ledger_lookup`, `ledger_record` (retries included); the
    /// runtime times `publish`.
    package let ledgerLookup: Histogram
    package let ledgerRecord: Histogram
    /// Age of the oldest consumption request seen and not yet answered, in seconds (refreshed every 30 s).
    /// Purchases Apple reported that wait for a job (refreshed with each round of credits).
    package let unclaimedWaiting: Gauge
    /// Credits of purchases no job claimed, published (`receipt.unclaimed`).
    package let unclaimedCredited: Counter
    /// Notification records the processor took from this replica's receiver, and those it verified again.
    package let notificationsTakenFromReceiver: Counter
    package let notificationsVerifiedAgain: Counter

    /// The handlers' own operations whose failures are counted (the runtime counts its own beside them).
    package static let operations = ["ledger_lookup", "ledger_record", "notification_revocation"]

    /// Seconds; from a fast local answer to Apple's slowest tail and the default 10 s timeout.
    package static let appleBuckets = [
        0.005, 0.01, 0.025, 0.05, 0.1, 0.102, 0.105, 0.11, 0.12, 0.15, 0.25, 0.5, 1, 2.5, 5, 10,
    ]
    package static let stageBuckets = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 5]

    /// Whether the worker is ready, once there is one: `receipt_worker_ready` reads it, and is 0 from the
    /// start (a replica stuck opening its ledger shows as not ready, not as absent).
    package let readiness = Mutex<(@Sendable () -> Bool)?>(nil)

    /// Games whose parked jobs share a partition of `topics.retries` (0 from the start: an alert reads it).
    package let retriesSharedGames: Gauge

    public init(registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        money = MoneyMetrics(registry: registry)
        jobsConsumed = registry.counter(
            "receipt_worker_jobs_consumed_total", help: "Job messages taken from the jobs topic.")
        retriesSharedGames = registry.gauge(
            "receipt_worker_retries_shared_games",
            help: "Games whose parked jobs share a partition of topics.retries with another game's (0: one each).")
        replayedResults = registry.counter(
            "receipt_worker_replayed_results_total", help: "Stored result events published again for re-delivered jobs."
        )
        appleRetries = registry.counter(
            "receipt_worker_apple_retries_total", help: "Verifications retried after a transient Apple failure.")
        for operation in Self.operations {
            _ = registry.counter(
                "receipt_worker_failures_total",
                help: "Failed attempts at the ledger, at publishing to Kafka and at commits, by operation.",
                labels: ["operation": operation])
        }
        func stage(_ name: String) -> Histogram {
            registry.histogram(
                "receipt_worker_stage_duration_seconds",
                help: "Time of each attempt at the ledger and at publishing to Kafka, by stage (failed attempts too).",
                buckets: Self.stageBuckets, labels: ["stage": name])
        }
        unclaimedWaiting = registry.gauge(
            "receipt_worker_unclaimed_purchases_waiting",
            help: "Purchases Apple reported (ONE_TIME_CHARGE, SUBSCRIBED) that wait for a job to claim them.")
        unclaimedCredited = registry.counter(
            "receipt_worker_unclaimed_credits_published_total",
            help: "receipt.unclaimed events published: purchases no job claimed in time, credited by the event.")
        notificationsTakenFromReceiver = registry.counter(
            "receipt_worker_notifications_taken_from_receiver_total",
            help:
                "Notification records processed from this replica's verification of the same bytes (its receiver, its sweep)."
        )
        notificationsVerifiedAgain = registry.counter(
            "receipt_worker_notifications_verified_again_total",
            help: "Notification records the processor verified again (received by another replica, or not kept).")
        ledgerLookup = stage("ledger_lookup")
        ledgerRecord = stage("ledger_record")
        for outcome in Self.receivedOutcomes {
            _ = notificationReceived(type: .refund, outcome: outcome)
        }
        for outcome in Self.processedOutcomes {
            _ = notificationProcessed(type: .refund, outcome: outcome)
        }
        for outcome in Self.consumptionOutcomes {
            _ = consumptionAnswer(outcome)
        }
        for call in [
            "verify_receipt_production", "verify_receipt_sandbox", "transaction_info_production",
            "transaction_info_sandbox",
        ] {
            _ = appleHistogram(app: "default", call: call, outcome: "ok")
        }
        // The default app's Get Transaction Info lanes from the start: a dashboard and an alert read 0, not
        // "no data", before the first 429.
        for environment in ["production", "sandbox"] {
            _ = registry.counter(
                "receipt_worker_apple_lane_pauses_total",
                help: "Apple's 429s, each pausing its lane (app, endpoint, environment) until Retry-After.",
                labels: ["app": "default", "endpoint": "transaction_info", "environment": environment])
        }
        // Tracing's counters from 0, whether or not it is on (otel.endpoint): the dashboard reads 0, not "no data".
        _ = registry.counter(
            "receipt_worker_trace_spans_exported_total", help: "Spans the OTLP collector took (otel.endpoint).")
        for reason in ["queue_full", "export_failed"] {
            _ = registry.counter(
                "receipt_worker_trace_spans_dropped_total",
                help:
                    "Spans dropped: the queue full (otel.max_queued_spans), or a batch the collector refused (export_failed).",
                labels: ["reason": reason])
        }
        _ = registry.counter(
            "receipt_worker_trace_export_retries_total",
            help: "Batches the OTLP collector could not take then (429, 502, 503, 504, no answer), queued again.")
        registry.gauges("receipt_worker_ready", help: "1 when /readyz answers 200.") { [weak self] in
            [(Labels.none, self?.readiness.withLock { $0 }?() == true ? 1 : 0)]
        }
        prepareDecisions(apps: ["default"])
        for outcome in ["good", "revoked", "unknown", "unavailable", "untrusted"] { _ = revocationCheck(outcome) }
    }

    /// Money while it happens (``MoneyMetrics``).
    package let money: MoneyMetrics
    /// The series looked up at every job, by their labels' values (``SeriesMemo``).
    private let decisions = SeriesMemo<Counter>()
    private let appleCalls = SeriesMemo<Histogram>()
    private let laneWaits = SeriesMemo<Histogram>()

    /// The money series and refund requests of these apps, from 0.
    package func prepareMoney(apps: [String]) {
        money.prepare(apps: apps)
        for app in apps {
            _ = consumptionRequested(app: app)
            _ = oldestConsumptionRequest(app: app)
            _ = missedConsumptionRequests(app: app)
        }
    }

    /// The series of the sweep and of the subscription status checks of these apps, from 0: an alert reads the
    /// failed deliveries found.
    package func prepareSweep(apps: [String]) {
        for app in apps {
            for outcome in ["swept", "elsewhere", "failed"] { _ = sweep(app: app, outcome: outcome) }
            for found in ["failed_delivery", "gap", "rejected"] { _ = sweptNotifications(app: app, found: found) }
            for outcome in ["produced", "unchanged", "unknown", "pending", "failed"] {
                _ = statusCheck(app: app, outcome: outcome)
            }
        }
    }

    /// `receipt_worker_decisions_total`: result events decided, by app, decision and reason.
    package func counter(_ decision: ResultEvent.Decision, app: String) -> Counter {
        decisions.series(SeriesKey(app, decision.name, decision.reason)) {
            registry.counter(
                "receipt_worker_decisions_total",
                help: "Result events decided, by app, decision and reason (re-emitted replays not included).",
                labels: ["app": app, "decision": decision.name, "reason": decision.reason])
        }
    }

    /// Every decision's series of each app exists (at 0) from the start: a dashboard and an alert read 0, not
    /// "no data".
    package func prepareDecisions(apps: [String]) {
        for app in apps {
            _ = counter(.grant, app: app)
            for reason in DenyReason.allCases { _ = counter(.deny(reason), app: app) }
        }
    }

    /// For ``RateGovernor/Observer``: waits for a lane, and its pauses (Apple's 429s).
    /// A wait is observed at every call of a governed lane (found by ``SeriesMemo``); a pause at each of Apple's 429s.
    package func observeLane(app: String, _ lane: RateGovernor.Lane, waited: Duration, paused: Bool) {
        let environment = lane.sandbox ? "sandbox" : "production"
        func labels() -> Labels { ["app": app, "endpoint": lane.endpoint, "environment": environment] }
        if paused {
            registry.counter(
                "receipt_worker_apple_lane_pauses_total",
                help: "Apple's 429s, each pausing its lane (app, endpoint, environment) until Retry-After.",
                labels: labels()
            ).increment()
        } else {
            laneWaits.series(SeriesKey(app, lane.endpoint, environment)) {
                registry.histogram(
                    "receipt_worker_apple_lane_wait_seconds",
                    help: "Time a call waited for its lane's turn under Apple's rate limit (not an attempt).",
                    buckets: Self.stageBuckets + [10, 30, 60, 300], labels: labels())
            }.observe(waited)
        }
    }

    /// For ``AppleCallObserver``.
    package func observeAppleCall(app: String, _ call: String, outcome: String, duration: Duration) {
        appleHistogram(app: app, call: call, outcome: outcome).observe(duration)
    }

    private func appleHistogram(app: String, call: String, outcome: String) -> Histogram {
        appleCalls.series(SeriesKey(app, call, outcome)) {
            registry.histogram(
                "receipt_worker_apple_request_duration_seconds",
                help: "HTTP calls to Apple, by app, endpoint (and environment) and outcome.",
                buckets: Self.appleBuckets, labels: ["app": app, "endpoint": call, "outcome": outcome])
        }
    }
}
