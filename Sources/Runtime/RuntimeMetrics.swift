import Observability
import Vocabulary

/// The runtime's metrics (README, "Metrics"): what happens to messages whatever their topic. Counters on the
/// hot path are resolved once here; state owned elsewhere (slots, partitions) is read at scrape time.
final class RuntimeMetrics: Sendable {
    let registry: MetricsRegistry
    /// From taking a job to its outcome acknowledged by the broker, per app (``duration(app:)``).
    private let durations = SeriesMemo<Histogram>()
    /// Each attempt at publishing an outcome.
    let publish: Histogram
    private let deadLetters: [String: Counter]
    private let failures: [String: Counter]

    /// The runtime's own operations whose failures are counted (each failed attempt).
    static let operations = ["publish_result", "publish_dead_letter", "park", "commit"]
    /// Fine around 100 ms (Apple's usual latency) so the benchmark can read the worker's own p99 from it.
    static let durationBuckets = [
        0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.105, 0.11, 0.12, 0.135, 0.15, 0.2, 0.25, 0.5, 1, 2.5, 5, 10,
        30, 60,
    ]
    static let stageBuckets = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 5]

    init(registry: MetricsRegistry, groups configurationGroups: [String] = []) {
        self.registry = registry
        publish = registry.histogram(
            "receipt_worker_stage_duration_seconds",
            help: "Time of each attempt at the ledger and at publishing to Kafka, by stage (failed attempts too).",
            buckets: Self.stageBuckets, labels: ["stage": "publish"])
        // Every dead-letter reason's series exists (at 0) from the start, for each group named in the
        // configuration (an app's jobs, its consumption answers, the notifications).
        var deadLetters: [String: Counter] = [:]
        for group in Set(configurationGroups) {
            for reason in DeadLetterReason.allCases {
                deadLetters["\(group)/\(reason.rawValue)"] = Self.deadLetterCounter(registry, reason, group)
            }
        }
        self.deadLetters = deadLetters
        failures = Dictionary(
            uniqueKeysWithValues: Self.operations.map { operation in
                (operation, Self.failureCounter(registry, operation))
            })
        // Each group's parked series from 0 too: the parked-backlog panel reads 0, not "no data".
        for group in Set(configurationGroups) { _ = parked(group) }
    }

    /// The take-to-answer histogram of `app`'s jobs: from the worker taking a job off its topic (before it waits
    /// for a slot) to its result or dead letter acknowledged by the broker.
    func duration(app: String) -> Histogram {
        durations.series(SeriesKey(app)) {
            registry.histogram(
                "receipt_worker_job_duration_seconds",
                help: "From taking a job to its result (or dead letter) acknowledged by the broker, by app.",
                buckets: Self.durationBuckets, labels: ["app": app])
        }
    }

    func failure(_ operation: String) -> Counter {
        failures[operation] ?? Self.failureCounter(registry, operation)
    }

    /// Messages forwarded to the park topic because their group's waiting room was full.
    func parked(_ group: String) -> Counter {
        registry.counter(
            "receipt_worker_messages_parked_total",
            help: "Messages forwarded to topics.retries because their group's waiting room was full, by group.",
            labels: ["group": group])
    }

    /// `group`: the message's group (an app, `consumption:` and an app, `notifications`).
    func deadLetter(reason: DeadLetterReason, group: String) -> Counter {
        deadLetters["\(group)/\(reason.rawValue)"] ?? Self.deadLetterCounter(registry, reason, group)
    }

    static func deadLetterCounter(_ registry: MetricsRegistry, _ reason: DeadLetterReason, _ group: String) -> Counter {
        registry.counter(
            "receipt_worker_dlq_messages_total", help: "Messages sent to the dead-letter topic, by reason and group.",
            labels: ["reason": reason.rawValue, "group": group])
    }

    static func failureCounter(_ registry: MetricsRegistry, _ operation: String) -> Counter {
        registry.counter(
            "receipt_worker_failures_total",
            help: "Failed attempts at the ledger, at publishing to Kafka and at commits, by operation.",
            labels: ["operation": operation])
    }
}
