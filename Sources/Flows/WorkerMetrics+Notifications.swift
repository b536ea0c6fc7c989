package import Vocabulary
package import Observability

// The families of the notifications, their sweep, the subscription status checks and refund (consumption)
// requests: looked up when they happen, far fewer than jobs.
extension WorkerMetrics {
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

    /// Refund (consumption) requests of `app` whose deadline passed in the last day with no answer at all.
    package func missedConsumptionRequests(app: String) -> Gauge {
        registry.gauge(
            "receipt_worker_consumption_requests_missed",
            help: "Refund (consumption) requests whose deadline passed in the last 24 h still open, no answer taken by"
                + " Apple (none came in time, or it could not be sent): Apple decided them without the game's data. By app.",
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
    package static let consumptionOutcomes = [
        "sent", "no_consent", "refused", "late", "failed", "superseded", "policy_superseded",
    ]

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
            help: "Answers to consumption requests, by outcome (sent, no_consent, refused, late, failed, superseded:"
                + " a newer answer of the transaction took over, policy_superseded: a policy's answer not sent, a grant"
                + " service answered first).",
            labels: ["outcome": outcome])
    }

    package static func label(notificationType type: NotificationType?) -> String {
        guard let type else { return "unverified" }
        return type.isKnown ? type.rawValue : "other"
    }
}
