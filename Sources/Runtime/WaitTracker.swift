import Foundation
import Kafka
import Observability
import Synchronization

/// What players (and Apple) wait, as the runtime sees its messages: a histogram per flow and app of each wait to
/// its answer (`receipt_worker_FLOW_wait_seconds{app}`), and, while messages are unanswered, the age of the oldest
/// one per app and partition (`receipt_worker_FLOW_lag_seconds{app,topic,partition}`): lag in seconds, which a
/// backlog held in Kafka moves though the time from taking a message to its answer does not. A start in the
/// future (a producer's clock ahead of ours) counts as no wait, and is counted (`receipt_worker_wait_clock_skew_total`).
final class WaitTracker: Sendable {
    private struct Key: Hashable {
        var flow: String
        var app: String
        var partition: TopicPartition
    }

    private let registry: MetricsRegistry
    /// The wait histograms by flow and app (``SeriesMemo``: looked up at every message).
    private let waits = SeriesMemo<Histogram>()
    /// The starts of the messages taken and not answered, by key and offset.
    private let open = Mutex<[Key: [Int64: Date]]>([:])
    private let now: @Sendable () -> Date

    /// Up to an hour and more: a backlog, not Apple's latency.
    static let buckets = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200]

    init(registry: MetricsRegistry, now: @escaping @Sendable () -> Date = Date.init) {
        self.registry = registry
        self.now = now
        for flow in ["job", "notification"] { _ = skew(flow: flow) }
        registry.gauges(
            "receipt_worker_job_lag_seconds",
            help: "Age of the oldest job taken and not yet answered, by app and partition (lag in seconds)."
        ) { [weak self] in self?.ages(flow: "job") ?? [] }
        registry.gauges(
            "receipt_worker_notification_lag_seconds",
            help:
                "Age (from Apple's signedDate) of the oldest notification taken and not yet answered, by app and partition."
        ) { [weak self] in self?.ages(flow: "notification") ?? [] }
    }

    /// The wait histogram of a flow and app: registered from the start for the configured apps, so a dashboard
    /// reads 0 before the first message.
    func histogram(flow: String, app: String) -> Histogram {
        waits.series(SeriesKey(flow, app)) { made(flow: flow, app: app) }
    }

    private func made(flow: String, app: String) -> Histogram {
        flow == "job"
            ? registry.histogram(
                "receipt_worker_job_wait_seconds",
                help: "From a job's send (its Kafka timestamp) to its answer acknowledged by the broker, by app.",
                buckets: Self.buckets, labels: ["app": app])
            : registry.histogram(
                "receipt_worker_notification_wait_seconds",
                help: "From Apple's signing of a notification (its signedDate) to its event acknowledged, by app.",
                buckets: Self.buckets, labels: ["app": app])
    }

    private func skew(flow: String) -> Counter {
        registry.counter(
            "receipt_worker_wait_clock_skew_total",
            help: "Waits that began in the future by our clock (a producer's clock ahead), counted as no wait.",
            labels: ["flow": flow])
    }

    func began(_ start: WaitStart, at offset: Int64, in partition: TopicPartition) {
        let key = Key(flow: start.flow, app: start.app, partition: partition)
        // Taken out and put back: a change through the dictionary's subscript (with a default, or optional)
        // allocated its accessor's frame at every call, twice a message.
        open.withLock { open in
            var starts = open.removeValue(forKey: key) ?? [:]
            starts[offset] = start.at
            open[key] = starts
        }
    }

    /// The message was answered (acknowledged): its wait is observed.
    func answered(_ start: WaitStart, at offset: Int64, in partition: TopicPartition) {
        ended(start, at: offset, in: partition)
        let waited = now().timeIntervalSince(start.at)
        if waited < 0 { skew(flow: start.flow).increment() }
        histogram(flow: start.flow, app: start.app).observe(max(waited, 0))
    }

    /// The message left unanswered (let go, parked, its partition revoked): no longer waiting here.
    func ended(_ start: WaitStart, at offset: Int64, in partition: TopicPartition) {
        let key = Key(flow: start.flow, app: start.app, partition: partition)
        open.withLock { open in
            guard var starts = open.removeValue(forKey: key) else { return }
            starts[offset] = nil
            if !starts.isEmpty { open[key] = starts }
        }
    }

    private func ages(flow: String) -> [(Labels, Double)] {
        let current = now()
        return open.withLock { open in
            open.compactMap { key, starts -> (Labels, Double)? in
                guard key.flow == flow, let oldest = starts.values.min() else { return nil }
                return (
                    [
                        "app": key.app, "topic": key.partition.topic,
                        "partition": String(key.partition.partition),
                    ], max(0, current.timeIntervalSince(oldest))
                )
            }
        }
    }
}

extension WaitStart {
    /// The header a parked copy carries its wait's start in (milliseconds since the epoch), so its wait goes on
    /// counting from the first send, not from the park.
    static let parkedHeader = "wait_started_at"
}
