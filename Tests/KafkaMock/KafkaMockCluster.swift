internal import CRdKafka

/// librdkafka's mock cluster, in the test process, listening on loopback: a broker whose faults a test sets (a
/// partition without a leader, errors returned to the next requests). For tests only (the product never links
/// it): it keeps no transactional offsets and is not Kafka.
///
/// `@unchecked Sendable`: librdkafka's mock calls take the cluster's own lock.
package final class KafkaMockCluster: @unchecked Sendable {
    /// The client the cluster lives in (librdkafka's mock cluster needs one); it logs only errors.
    private let handle: OpaquePointer
    private let cluster: OpaquePointer
    /// `host:port,...` for `bootstrap.servers`.
    package let bootstrapServers: String

    package init(brokers: Int32 = 1) throws {
        var errstr = [CChar](repeating: 0, count: 512)
        let conf = rd_kafka_conf_new()
        rd_kafka_conf_set(conf, "log_level", "3", &errstr, errstr.count)
        guard let handle = rd_kafka_new(RD_KAFKA_PRODUCER, conf, &errstr, errstr.count) else {
            throw MockClusterError(reason: String(decoding: errstr.prefix { $0 != 0 }.map(UInt8.init), as: UTF8.self))
        }
        guard let cluster = rd_kafka_mock_cluster_new(handle, brokers) else {
            rd_kafka_destroy(handle)
            throw MockClusterError(reason: "the mock cluster could not start")
        }
        self.handle = handle
        self.cluster = cluster
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
    }

    deinit {
        rd_kafka_mock_cluster_destroy(cluster)
        rd_kafka_destroy(handle)
    }

    package func createTopic(_ name: String, partitions: Int32) throws {
        try Self.check(rd_kafka_mock_topic_create(cluster, name, partitions, 1))
    }

    /// Makes `broker` the partition's leader; -1 leaves it without one.
    package func setLeader(topic: String, partition: Int32, broker: Int32) throws {
        try Self.check(rd_kafka_mock_partition_set_leader(cluster, topic, partition, broker))
    }

    /// The next `count` Produce requests are refused as not authorized (a produce ACL denied).
    package func refuseProduce(count: Int) {
        let errors = [rd_kafka_resp_err_t](repeating: RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, count: count)
        errors.withUnsafeBufferPointer { rd_kafka_mock_push_request_errors_array(cluster, 0, count, $0.baseAddress) }
    }

    /// The next `count` Produce requests are refused as too large for the topic (`max.message.bytes`): a record
    /// the broker will never take.
    package func refuseProduceAsTooLarge(count: Int) {
        let errors = [rd_kafka_resp_err_t](repeating: RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, count: count)
        errors.withUnsafeBufferPointer { rd_kafka_mock_push_request_errors_array(cluster, 0, count, $0.baseAddress) }
    }

    /// How the broker refuses a Produce request.
    package enum ProduceRefusal {
        /// Too large for the topic: never taken (``refuseProduceAsTooLarge(count:)``).
        case tooLarge
        /// Not authorized: taken once the ACL allows it.
        case unauthorized
    }

    /// The next Produce requests refused in this order, one each.
    package func refuseProduce(_ refusals: [ProduceRefusal]) {
        let errors = refusals.map {
            switch $0 {
            case .tooLarge: RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE
            case .unauthorized: RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED
            }
        }
        errors.withUnsafeBufferPointer {
            rd_kafka_mock_push_request_errors_array(cluster, 0, errors.count, $0.baseAddress)
        }
    }

    private static func check(_ err: rd_kafka_resp_err_t) throws {
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw MockClusterError(reason: String(cString: rd_kafka_err2str(err)))
        }
    }
}

/// What the mock cluster refused.
package struct MockClusterError: Error, CustomStringConvertible {
    package let reason: String
    package var description: String { "mock cluster: \(reason)" }
}
