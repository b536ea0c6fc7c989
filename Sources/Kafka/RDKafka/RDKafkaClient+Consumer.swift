import CRdKafka
import Observability

/// The consumer's calls into librdkafka: ``KafkaConsumer`` says what it does, this file how.
extension RDKafkaClient {
    /// A consumer-group client whose rebalances and errors are served by the consumer poll.
    static func consumer(properties: KafkaProperties, logger: Logger) throws -> RDKafkaClient {
        let client = try RDKafkaClient(
            type: RD_KAFKA_CONSUMER, properties: properties, logger: logger,
            configure: { rd_kafka_conf_set_rebalance_cb($0, rebalanceCallback) })
        rd_kafka_poll_set_consumer(client.handle)
        return client
    }

    func subscribe(topics: [String]) throws(KafkaError) {
        let list = TopicPartitionList(topics.map { TopicPartition(topic: $0, partition: RD_KAFKA_PARTITION_UA) })
        let err = rd_kafka_subscribe(handle, list.pointer)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err) }
    }

    /// Commits synchronously (a blocking call: run it off the cooperative pool).
    func commitBlocking(_ offsets: [TopicPartition: Int64]) -> KafkaError? {
        let list = TopicPartitionList(offsets.map { $0.key }, offsets: offsets)
        let err = rd_kafka_commit(handle, list.pointer, 0)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { return KafkaError(err) }
        return list.firstError()
    }

    /// The committed offsets of `partitions` (blocking), absent where none is committed.
    func committedBlocking(_ partitions: [TopicPartition], timeout: Duration) -> Result<
        [TopicPartition: Int64], KafkaError
    > {
        let list = TopicPartitionList(partitions)
        let err = rd_kafka_committed(handle, list.pointer, Int32(clamping: timeout.milliseconds))
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { return .failure(KafkaError(err)) }
        return .success(list.offsets().filter { $0.value >= 0 })
    }

    /// librdkafka's symbolic offsets.
    static let offsetBeginning = Int64(RD_KAFKA_OFFSET_BEGINNING)
    static let offsetEnd = Int64(RD_KAFKA_OFFSET_END)

    /// The first offset written at or after each time (blocking); -1 where nothing was written since.
    func offsetsForTimesBlocking(_ times: [TopicPartition: Int64], timeout: Duration) -> Result<
        [TopicPartition: Int64], KafkaError
    > {
        let query = TopicPartitionList(Array(times.keys), offsets: times)
        let err = rd_kafka_offsets_for_times(handle, query.pointer, Int32(clamping: timeout.milliseconds))
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { return .failure(KafkaError(err)) }
        return .success(query.offsets())
    }

    func assign(_ offsets: [TopicPartition: Int64], order partitions: [TopicPartition]) throws(KafkaError) {
        let list = TopicPartitionList(partitions, offsets: offsets)
        let err = rd_kafka_assign(handle, list.pointer)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err) }
    }

    /// The low and high watermarks of a partition, asked of the broker (blocking).
    func watermarksBlocking(_ partition: TopicPartition, timeout: Duration) -> Result<
        (low: Int64, high: Int64), KafkaError
    > {
        var low: Int64 = 0
        var high: Int64 = 0
        let err = rd_kafka_query_watermark_offsets(
            handle, partition.topic, partition.partition, &low, &high, Int32(clamping: timeout.milliseconds))
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { return .failure(KafkaError(err)) }
        return .success((low, high))
    }

    func assignment() throws(KafkaError) -> [TopicPartition] {
        var raw: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        let err = rd_kafka_assignment(handle, &raw)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let raw else { throw KafkaError(err) }
        return TopicPartitionList(adopting: raw).partitions()
    }

    /// Leaves the group (blocking).
    func closeConsumerBlocking() { _ = rd_kafka_consumer_close(handle) }
}

extension KafkaProperties {
    /// Builds librdkafka's configuration and throws it away: what client creation would refuse, refused now.
    func validate() throws(KafkaError) { rd_kafka_conf_destroy(try makeConf()) }
}

extension KafkaError {
    static let unknownTopic = KafkaError(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
}
