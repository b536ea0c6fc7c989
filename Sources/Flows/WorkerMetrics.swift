package import AppleVerification
package import Events
import Foundation
public import Observability
package import Synchronization
package import Vocabulary

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
    package static let operations = ["ledger_lookup", "ledger_record"]

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
    package var money: MoneyMetrics { MoneyMetrics(registry: registry) }

    /// The money series and refund requests of these apps, from 0.
    package func prepareMoney(apps: [String]) {
        money.prepare(apps: apps)
        for app in apps {
            _ = consumptionRequested(app: app)
            _ = oldestConsumptionRequest(app: app)
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

    /// Rounds of the notification sweep, by app and outcome (`elsewhere`: another replica holds the lease).
    package func sweep(app: String, outcome: String) -> Counter {
        registry.counter(
            "receipt_worker_notification_sweeps_total",
            help: "Rounds of the sweep of Apple's notification history, by app and outcome (elsewhere: another"
                + " replica swept).", labels: ["app": app, "outcome": outcome])
    }

    /// Notifications a sweep found, by app and what it found: produced, as Apple could not deliver them
    /// (`failed_delivery`) or read after a silence (`gap`); or not produced because they do not verify (`rejected`:
    /// an alert reads it, since Apple's own notifications are expected to verify).
    package func sweptNotifications(app: String, found: String) -> Counter {
        registry.counter(
            "receipt_worker_swept_notifications_total",
            help: "Notifications the sweep found in Apple's history, by app: produced as failed_delivery (Apple"
                + " could not deliver them) or gap (read after a silence), or rejected (they do not verify; not"
                + " produced).", labels: ["app": app, "found": found])
    }

    /// Asks of a certificate chain's revocation status (OCSP), by outcome: good, revoked, unknown (the responder
    /// does not know a certificate), unavailable (no answer), untrusted (an answer that does not verify).
    package func revocationCheck(_ outcome: String) -> Counter {
        registry.counter(
            "receipt_worker_revocation_checks_total",
            help: "Asks of a certificate chain's revocation status (OCSP), by outcome (good, revoked, unknown,"
                + " unavailable, untrusted).", labels: ["outcome": outcome])
    }

    /// Subscriptions whose renewal or expiry was overdue, asked of Apple, by app and outcome: produced (Apple's
    /// answer put on the notifications topic), unchanged (that answer handled before), unknown (Apple knows no
    /// status of it, or its answer does not verify), pending (its answer's signing chain's revocation status is not
    /// known yet; asked again next round), failed (Apple or the broker did not answer; asked again next round).
    package func statusCheck(app: String, outcome: String) -> Counter {
        registry.counter(
            "receipt_worker_subscription_status_checks_total",
            help: "Overdue subscriptions asked of Apple (Get All Subscription Statuses), by app and outcome"
                + " (produced, unchanged, unknown, pending, failed).", labels: ["app": app, "outcome": outcome])
    }

    /// Refund requests the app's policy answered (no grant service did), by app and answer.
    package func consumptionPolicyAnswer(app: String, answer: String) -> Counter {
        registry.counter(
            "receipt_worker_consumption_policy_answers_total",
            help: "Refund (consumption) requests answered by the app's policy because no grant service answered, by"
                + " app and answer.", labels: ["app": app, "answer": answer])
    }

    /// The age of the oldest consumption (refund) request of `app` no answer reached Apple for: a gauge per app.
    package func oldestConsumptionRequest(app: String) -> Gauge {
        registry.gauge(
            "receipt_worker_consumption_request_oldest_unanswered_seconds",
            help: "Age of the oldest consumption (refund) request not yet answered, by app; Apple's deadline is 12 h.",
            labels: ["app": app])
    }

    /// Refund (consumption) requests Apple made, by app.
    package func consumptionRequested(app: String) -> Counter {
        registry.counter(
            "receipt_worker_consumption_requests_total",
            help: "Apple's refund (consumption) requests for purchases granted here, by app.", labels: ["app": app])
    }

    package static let receivedOutcomes = ["accepted", "rejected", "sandbox_dropped", "unavailable"]
    package static let processedOutcomes = ["published", "not_granted", "ignored", "replayed", "waiting"]
    package static let consumptionOutcomes = ["sent", "no_consent", "refused", "late", "failed", "policy_superseded"]

    /// A notification at the receiver: `type` is Apple's (`other` for one unknown here, nil, `unverified`, when
    /// it did not verify), so the series stay few whatever is posted.
    package func notificationReceived(type: NotificationType?, outcome: String) -> Counter {
        registry.counter(
            "receipt_worker_notifications_received_total",
            help: "App Store Server Notifications at the receiver, by type and outcome (accepted, rejected, ...).",
            labels: ["type": Self.label(notificationType: type), "outcome": outcome])
    }

    package func notificationProcessed(type: NotificationType, outcome: String) -> Counter {
        registry.counter(
            "receipt_worker_notifications_processed_total",
            help: "Notifications consumed from the notifications topic, by type and outcome (published, ...).",
            labels: ["type": Self.label(notificationType: type), "outcome": outcome])
    }

    package func consumptionAnswer(_ outcome: String) -> Counter {
        registry.counter(
            "receipt_worker_consumption_answers_total",
            help: "Answers to consumption requests, by outcome (sent, no_consent, refused, late, failed,"
                + " policy_superseded: a policy's answer not sent, a grant service answered first).",
            labels: ["outcome": outcome])
    }

    package static func label(notificationType type: NotificationType?) -> String {
        guard let type else { return "unverified" }
        return type.isKnown ? type.rawValue : "other"
    }

    /// `receipt_worker_decisions_total`: result events decided, by app, decision and reason.
    package func counter(_ decision: ResultEvent.Decision, app: String) -> Counter {
        registry.counter(
            "receipt_worker_decisions_total",
            help: "Result events decided, by app, decision and reason (re-emitted replays not included).",
            labels: ["app": app, "decision": decision.name, "reason": decision.reason])
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
    package func observeLane(app: String, _ lane: RateGovernor.Lane, waited: Duration, paused: Bool) {
        let labels: Labels = [
            "app": app, "endpoint": lane.endpoint, "environment": lane.sandbox ? "sandbox" : "production",
        ]
        if paused {
            registry.counter(
                "receipt_worker_apple_lane_pauses_total",
                help: "Apple's 429s, each pausing its lane (app, endpoint, environment) until Retry-After.",
                labels: labels
            ).increment()
        } else {
            registry.histogram(
                "receipt_worker_apple_lane_wait_seconds",
                help: "Time a call waited for its lane's turn under Apple's rate limit (not an attempt).",
                buckets: Self.stageBuckets + [10, 30, 60, 300], labels: labels
            ).observe(waited)
        }
    }

    /// For ``AppleCallObserver``.
    package func observeAppleCall(app: String, _ call: String, outcome: String, duration: Duration) {
        appleHistogram(app: app, call: call, outcome: outcome).observe(duration)
    }

    private func appleHistogram(app: String, call: String, outcome: String) -> Histogram {
        registry.histogram(
            "receipt_worker_apple_request_duration_seconds",
            help: "HTTP calls to Apple, by app, endpoint (and environment) and outcome.",
            buckets: Self.appleBuckets, labels: ["app": app, "endpoint": call, "outcome": outcome])
    }
}
