import Kafka
import Observability
import Synchronization

extension ConsumerRuntime {
    /// Gauges read at scrape time from the state the runtime already keeps.
    func registerGauges(_ registry: MetricsRegistry) {
        registry.gauges(
            "receipt_worker_jobs_in_flight",
            help: "Messages being handled, by group (an app, notifications, consumption)."
        ) { [scheduler] in scheduler.snapshot().groups.map { (["group": $0.group], Double($0.running)) } }
        registry.gauges(
            "receipt_worker_jobs_waiting",
            help: "Messages taken from Kafka and waiting for a slot of their group's worker.max_in_flight."
        ) { [scheduler] in scheduler.snapshot().groups.map { (["group": $0.group], Double($0.waiting)) } }
        registry.gauges(
            "receipt_worker_jobs_in_flight_bytes",
            help: "Bytes of the messages being handled, by group (budget: worker.max_in_flight_bytes each)."
        ) { [scheduler] in scheduler.snapshot().groups.map { (["group": $0.group], Double($0.bytes)) } }
        registry.gauges(
            "receipt_worker_intake_paused",
            help: "1 while a topic's intake is paused (a full group that cannot park, or the byte budget full)."
        ) { [consumer] in [(Labels.none, consumer.isIntakePaused ? 1 : 0)] }
        registry.gauges("receipt_worker_topic_paused", help: "1 while the topic's intake is paused, by topic read.") {
            [weak self] in
            guard let self else { return [] }
            let paused = consumer.pausedTopics
            return state.withLock { $0.subscribed }.sorted().map { topic in
                (["topic": topic], (paused?.contains(topic) ?? true) ? 1 : 0)
            }
        }
        registry.gauges(
            "receipt_worker_group_full_seconds",
            help:
                "Seconds the group's waiting room has been full (an app whose Apple lane is paused or circuit open): its new messages wait on topics.retries, or its topics pause; 0 when not full."
        ) { [scheduler] in scheduler.fullDurations().map { (["group": $0.group], $0.seconds) } }
        registry.gauges(
            "receipt_worker_messages_parking",
            help: "Messages being forwarded to topics.retries now (their bytes count in the replica's budget)."
        ) { [scheduler] in [(Labels.none, Double(scheduler.snapshot().parking))] }
        registry.gauges(
            "receipt_worker_partition_committed_offset", help: "The next offset committed, per assigned partition."
        ) { [book] in
            book.partitionsSnapshot().compactMap { partition in
                partition.committed.map { (Self.labels(partition.partition), Double($0)) }
            }
        }
        registry.gauges(
            "receipt_worker_partition_outstanding_jobs",
            help: "Messages of the partition taken and not yet answered (holding its commits back)."
        ) { [book] in book.partitionsSnapshot().map { (Self.labels($0.partition), Double($0.outstanding)) } }
        registry.gauges(
            "receipt_worker_partition_lag",
            help:
                "Messages of the partition not yet committed (high watermark minus committed offset), measured every few seconds."
        ) { [weak self] in
            guard let self else { return [] }
            let lags = state.withLock { $0.lags }
            return book.assigned.compactMap { partition in lags[partition].map { (Self.labels(partition), Double($0)) }
            }
        }
        registry.gauges(
            "receipt_worker_partition_idle_seconds",
            help:
                "Seconds since the partition last made progress while it has lag (0 without lag); above worker.stall_timeout_ms it is stalled."
        ) { [weak self] in
            guard let self else { return [] }
            return idleness().map { (Self.labels($0.partition), $0.seconds) }
        }
    }

    private static func labels(_ partition: TopicPartition) -> Labels {
        ["topic": partition.topic, "partition": String(partition.partition)]
    }
}
