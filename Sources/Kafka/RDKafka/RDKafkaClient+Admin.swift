import CRdKafka
import Observability

/// Topic administration's calls into librdkafka, behind ``KafkaAdmin``.
extension RDKafkaClient {
    /// A producer-type client for metadata and admin requests (consumer settings would only draw warnings).
    static func admin(properties: KafkaProperties, logger: Logger) throws -> RDKafkaClient {
        try RDKafkaClient(type: RD_KAFKA_PRODUCER, properties: properties, logger: logger)
    }

    /// Creates the topics that do not exist yet (blocking); nil when every one exists now.
    func createTopicsBlocking(_ topics: [(name: String, partitions: Int)], timeout: Duration) -> KafkaError? {
        let timeoutMs = Int32(clamping: timeout.milliseconds)
        var errstr = [CChar](repeating: 0, count: 512)
        var newTopics: [OpaquePointer?] = []
        defer { newTopics.forEach { rd_kafka_NewTopic_destroy($0) } }
        for topic in topics {
            guard
                let newTopic = rd_kafka_NewTopic_new(topic.name, Int32(topic.partitions), -1, &errstr, errstr.count)
            else { return KafkaError(code: .invalidConfiguration, reason: errstr.string) }
            newTopics.append(newTopic)
        }
        let queue = rd_kafka_queue_new(handle)
        defer { rd_kafka_queue_destroy(queue) }
        let options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_CREATETOPICS)
        defer { rd_kafka_AdminOptions_destroy(options) }
        rd_kafka_AdminOptions_set_operation_timeout(options, timeoutMs, &errstr, errstr.count)
        rd_kafka_AdminOptions_set_request_timeout(options, timeoutMs, &errstr, errstr.count)
        newTopics.withUnsafeMutableBufferPointer { buffer in
            rd_kafka_CreateTopics(handle, buffer.baseAddress, buffer.count, options, queue)
        }
        guard let event = rd_kafka_queue_poll(queue, timeoutMs + 1000) else {
            return KafkaError(RD_KAFKA_RESP_ERR__TIMED_OUT, reason: "CreateTopics timed out")
        }
        defer { rd_kafka_event_destroy(event) }
        let err = rd_kafka_event_error(event)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return KafkaError(err, reason: String(cString: rd_kafka_event_error_string(event)))
        }
        var count = 0
        guard let result = rd_kafka_event_CreateTopics_result(event),
            let results = rd_kafka_CreateTopics_result_topics(result, &count)
        else { return nil }
        for index in 0..<count {
            let topicErr = rd_kafka_topic_result_error(results[index])
            if topicErr != RD_KAFKA_RESP_ERR_NO_ERROR && topicErr != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS {
                let name = String(cString: rd_kafka_topic_result_name(results[index]))
                return KafkaError(
                    topicErr, reason: "create topic \(name): \(String(cString: rd_kafka_err2str(topicErr)))")
            }
        }
        return nil
    }
}
