import Foundation
import Kafka

extension Worker {
    /// Publishes a result event with its CloudEvents headers, until the broker acknowledges it (true) or the
    /// job must be let go (false). `headers` are read back from the stored JSON when not given (a replayed
    /// event keeps its id, type and time).
    func publishResult(_ ticket: JobTicket, _ json: Data, key: String, headers given: [KafkaHeader]? = nil) async
        -> Bool
    {
        let headers = given ?? ResultEvent.headers(storedJSON: json, source: configuration.eventSource)
        let message = KafkaProducerMessage(
            topic: configuration.topics.results, key: Array(key.utf8), value: Array(json), headers: headers)
        let report = await retrying("publish_result", ticket, stage: metrics.publish) {
            try await self.producer.send(message)
        }
        guard case .success(let acknowledged?) = report else { return false }
        logger.debug("result published", ["offset": String(acknowledged.offset)])
        return true
    }

    /// Copies the original message to the DLQ with the contract's headers, until the broker acknowledges it
    /// (answered) or the job must be let go (delivered again). A message too large for a Kafka record once
    /// the headers are added (a 1 MB job on a topic whose limit is 1 MB) becomes a stub: the same key and
    /// headers, an empty value, `dlq_truncated: true` and `dlq_original_bytes`; the original stays readable
    /// at its source offset while the jobs topic retains it.
    func deadLetter(_ ticket: JobTicket, reason: String, error: String, attempts: Int) async -> JobEnd {
        let message = ticket.message
        logger.warning(
            "job dead-lettered",
            [
                "reason": reason, "error": error, "partition": message.topicPartition.description,
                "offset": String(message.offset),
            ])
        let headers = [
            KafkaHeader(name: "dlq_reason", string: reason), KafkaHeader(name: "dlq_error", string: error),
            KafkaHeader(name: "dlq_source_topic", string: message.topic),
            KafkaHeader(name: "dlq_source_partition", string: String(message.partition)),
            KafkaHeader(name: "dlq_source_offset", string: String(message.offset)),
            KafkaHeader(name: "dlq_attempts", string: String(attempts)),
        ]
        let fits = message.value.count + (message.key?.count ?? 0) + 4_096 <= maxRecordBytes
        if fits {
            let letter = KafkaProducerMessage(
                topic: configuration.topics.dlq, key: message.key, value: message.value, headers: headers)
            switch await retrying("publish_dead_letter", ticket, { try await self.producer.send(letter) }) {
            case .success(_?):
                metrics.deadLetter(reason: reason).increment()
                return .answered
            case .success(nil): return .redeliver
            case .failure: break  // the broker's own limit is lower: send the stub below
            }
        }
        let stub = KafkaProducerMessage(
            topic: configuration.topics.dlq, key: message.key, value: [],
            headers: headers + [
                KafkaHeader(name: "dlq_truncated", string: "true"),
                KafkaHeader(name: "dlq_original_bytes", string: String(message.value.count)),
            ])
        guard case .success(_?) = await retrying("publish_dead_letter", ticket, { try await self.producer.send(stub) })
        else { return .redeliver }
        logger.warning(
            "dead letter too large for a record: sent as a stub",
            ["bytes": String(message.value.count), "offset": String(message.offset)])
        metrics.deadLetter(reason: reason).increment()
        return .answered
    }

    /// The largest record the producer sends (`kafka.message.max.bytes`, librdkafka's default 1,000,000).
    var maxRecordBytes: Int { configuration.kafka["message.max.bytes"].flatMap(Int.init) ?? 1_000_000 }
}

extension ResultEvent {
    /// The CloudEvents headers of an event stored as JSON (a replayed event keeps its id, type and time).
    static func headers(storedJSON json: Data, source: String) -> [KafkaHeader] {
        let object = (try? JSONSerialization.jsonObject(with: json)) as? [String: Any] ?? [:]
        return headers(
            eventID: object["event_id"] as? String ?? "", granted: object["decision"] as? String == "grant",
            time: object["verified_at"] as? String ?? "", source: source)
    }
}
