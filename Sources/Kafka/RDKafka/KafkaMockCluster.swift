import CRdKafka
import Observability

/// librdkafka's mock cluster, in this process, listening on loopback: a broker whose faults a test sets (a
/// partition without a leader, errors returned to the next requests). For tests only: it keeps no
/// transactional offsets and is not Kafka.
///
/// `@unchecked Sendable`: librdkafka's mock calls take the cluster's own lock.
package final class KafkaMockCluster: @unchecked Sendable {
    private let client: RDKafkaClient
    private let cluster: OpaquePointer
    /// `host:port,...` for `bootstrap.servers`.
    package let bootstrapServers: String

    package init(brokers: Int32 = 1, logger: Logger) throws {
        client = try RDKafkaClient(
            type: RD_KAFKA_PRODUCER, properties: KafkaProperties([], overrides: [:]), logger: logger)
        guard let cluster = rd_kafka_mock_cluster_new(client.handle, brokers) else {
            throw KafkaError(code: .invalidConfiguration, reason: "the mock cluster could not start")
        }
        self.cluster = cluster
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
    }

    deinit { rd_kafka_mock_cluster_destroy(cluster) }

    package func createTopic(_ name: String, partitions: Int32) throws {
        let err = rd_kafka_mock_topic_create(cluster, name, partitions, 1)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err) }
    }

    /// Makes `broker` the partition's leader; -1 leaves it without one.
    package func setLeader(topic: String, partition: Int32, broker: Int32) throws {
        let err = rd_kafka_mock_partition_set_leader(cluster, topic, partition, broker)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err) }
    }

    /// The next `count` Produce requests are refused as not authorized (a produce ACL denied).
    package func refuseProduce(count: Int) {
        let errors = [rd_kafka_resp_err_t](repeating: RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, count: count)
        errors.withUnsafeBufferPointer { rd_kafka_mock_push_request_errors_array(cluster, 0, count, $0.baseAddress) }
    }
}
