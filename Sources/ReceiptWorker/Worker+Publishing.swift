import Foundation
import Kafka

extension Worker {
    /// Publishes a result event with its CloudEvents headers, until the broker acknowledges it. `headers`
    /// are read back from the stored JSON when not given (a replayed event keeps its id, type and time).
    func publishResult(_ json: Data, key: String, headers given: [KafkaHeader]? = nil) async {
        let headers = given ?? ResultEvent.headers(storedJSON: json, source: configuration.eventSource)
        let message = KafkaProducerMessage(
            topic: configuration.topics.results, key: Array(key.utf8), value: Array(json), headers: headers)
        let report = await retrying("publishing a result", stage: metrics.publish) {
            try await self.producer.send(message)
        }
        logger.debug("result published", ["offset": report.map { String($0.offset) } ?? "none"])
    }

    /// Copies the original message to the DLQ with the contract's headers, until the broker acknowledges it.
    func deadLetter(_ message: KafkaMessage, reason: String, error: String, attempts: Int) async {
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
        let letter = KafkaProducerMessage(
            topic: configuration.topics.dlq, key: message.key, value: message.value, headers: headers)
        if await retrying("publishing a dead letter", { try await self.producer.send(letter) }) != nil {
            metrics.deadLetter(reason: reason).increment()
        }
    }
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
