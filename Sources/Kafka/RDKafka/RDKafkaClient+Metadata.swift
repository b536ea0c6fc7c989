import CRdKafka
import Observability

/// What the broker says of a topic, from librdkafka: the metadata and DescribeTopics calls behind
/// ``KafkaAdmin/topicHealth(of:properties:timeout:logger:)``.
extension RDKafkaClient {
    /// The partition count of `topic`, asked of the broker; `_UNKNOWN_TOPIC` (or the broker's error) when the topic
    /// does not exist. Blocking: call through `Blocking.run`.
    func partitionCount(topic: String, timeout: Duration) -> Result<Int32, KafkaError> {
        described(topic: topic, timeout: timeout) { $0.partition_cnt }
    }

    /// Blocking: call through `Blocking.run`.
    func topicHealth(topic: String, timeout: Duration) -> Result<TopicHealth, KafkaError> {
        described(topic: topic, timeout: timeout) { described in
            var leaderless: [Int32] = []
            for index in 0..<Int(described.partition_cnt) {
                let partition = described.partitions[index]
                if partition.leader < 0 || partition.err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE {
                    leaderless.append(partition.id)
                }
            }
            return (Int(described.partition_cnt), leaderless.sorted())
        }.map { partitions, leaderless in
            TopicHealth(
                partitions: partitions, leaderless: leaderless,
                writable: writeAuthorized(topic: topic, timeout: timeout))
        }
    }

    /// The broker's metadata of one topic, read by `body` while it is alive: `_UNKNOWN_TOPIC` for a topic the
    /// broker does not describe or that has no partition, the broker's error for the topic otherwise. Blocking.
    private func described<T>(topic: String, timeout: Duration, _ body: (rd_kafka_metadata_topic_t) -> T)
        -> Result<T, KafkaError>
    {
        guard let handle = rd_kafka_topic_new(self.handle, topic, nil) else {
            return .failure(KafkaError(code: .invalidConfiguration, reason: "topic \(topic)"))
        }
        defer { rd_kafka_topic_destroy(handle) }
        var metadata: UnsafePointer<rd_kafka_metadata_t>?
        let err = rd_kafka_metadata(self.handle, 0, handle, &metadata, Int32(clamping: timeout.milliseconds))
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else { return .failure(KafkaError(err)) }
        defer { rd_kafka_metadata_destroy(metadata) }
        guard metadata.pointee.topic_cnt == 1 else { return .failure(KafkaError(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)) }
        let described = metadata.pointee.topics[0]
        guard described.err == RD_KAFKA_RESP_ERR_NO_ERROR, described.partition_cnt > 0 else {
            let topicErr =
                described.err == RD_KAFKA_RESP_ERR_NO_ERROR ? RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC : described.err
            return .failure(KafkaError(topicErr))
        }
        return .success(body(described))
    }

    /// Whether the broker's authorized operations for `topic` include WRITE; nil when it does not say (an
    /// older broker, one without an authorizer, or the request failing).
    private func writeAuthorized(topic: String, timeout: Duration) -> Bool? {
        let timeoutMs = Int32(clamping: timeout.milliseconds)
        var errstr = [CChar](repeating: 0, count: 512)
        let collection = topic.withCString { name -> OpaquePointer? in
            var names: [UnsafePointer<CChar>?] = [name]
            return names.withUnsafeMutableBufferPointer { rd_kafka_TopicCollection_of_topic_names($0.baseAddress, 1) }
        }
        guard let collection else { return nil }
        defer { rd_kafka_TopicCollection_destroy(collection) }
        let queue = rd_kafka_queue_new(handle)
        defer { rd_kafka_queue_destroy(queue) }
        let options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_DESCRIBETOPICS)
        defer { rd_kafka_AdminOptions_destroy(options) }
        rd_kafka_AdminOptions_set_request_timeout(options, timeoutMs, &errstr, errstr.count)
        if let error = rd_kafka_AdminOptions_set_include_authorized_operations(options, 1) {
            rd_kafka_error_destroy(error)
            return nil
        }
        rd_kafka_DescribeTopics(handle, collection, options, queue)
        guard let event = rd_kafka_queue_poll(queue, timeoutMs + 1000) else { return nil }
        defer { rd_kafka_event_destroy(event) }
        guard rd_kafka_event_error(event) == RD_KAFKA_RESP_ERR_NO_ERROR,
            let result = rd_kafka_event_DescribeTopics_result(event)
        else { return nil }
        var count = 0
        guard let topics = rd_kafka_DescribeTopics_result_topics(result, &count), count == 1,
            let description = topics[0]
        else { return nil }
        if let error = rd_kafka_TopicDescription_error(description),
            rd_kafka_error_code(error) == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED
        {
            return false
        }
        var operations = 0
        guard let allowed = rd_kafka_TopicDescription_authorized_operations(description, &operations),
            operations > 0
        else { return nil }
        return (0..<operations).contains { allowed[$0] == RD_KAFKA_ACL_OPERATION_WRITE }
    }
}
