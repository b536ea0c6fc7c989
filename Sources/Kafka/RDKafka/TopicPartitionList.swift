import CRdKafka

/// Owns an `rd_kafka_topic_partition_list_t` and destroys it in `deinit`. Made, used and dropped within one call
/// into librdkafka: never shared between threads.
final class TopicPartitionList {
    let pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init(_ partitions: [TopicPartition], offsets: [TopicPartition: Int64] = [:]) {
        pointer = rd_kafka_topic_partition_list_new(Int32(clamping: partitions.count))
        for partition in partitions {
            let element = rd_kafka_topic_partition_list_add(pointer, partition.topic, partition.partition)
            if let offset = offsets[partition] { element?.pointee.offset = offset }
        }
    }

    init(adopting pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        self.pointer = pointer
    }

    deinit {
        rd_kafka_topic_partition_list_destroy(pointer)
    }

    private var elements: UnsafeMutableBufferPointer<rd_kafka_topic_partition_t> {
        UnsafeMutableBufferPointer(start: pointer.pointee.elems, count: Int(pointer.pointee.cnt))
    }

    func partitions() -> [TopicPartition] {
        elements.map { TopicPartition(topic: String(cString: $0.topic), partition: $0.partition) }
    }

    func offsets() -> [TopicPartition: Int64] {
        Dictionary(
            elements.map {
                (TopicPartition(topic: String(cString: $0.topic), partition: $0.partition), $0.offset)
            },
            uniquingKeysWith: { _, last in last })
    }

    /// The first per-partition error, if any.
    func firstError() -> KafkaError? {
        guard let failed = elements.first(where: { $0.err != RD_KAFKA_RESP_ERR_NO_ERROR }) else { return nil }
        let reason =
            "\(String(cString: failed.topic))[\(failed.partition)]: \(String(cString: rd_kafka_err2str(failed.err)))"
        return KafkaError(failed.err, reason: reason)
    }
}
