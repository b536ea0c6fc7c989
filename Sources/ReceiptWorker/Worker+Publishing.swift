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
        let report = await retrying("publishing a result", ticket, stage: metrics.publish) {
            try await self.producer.send(message)
        }
        guard case .success(let acknowledged?) = report else { return false }
        logger.debug("result published", ["offset": String(acknowledged.offset)])
        return true
    }

    /// Copies the original message to the DLQ with the contract's headers, until the broker acknowledges it
    /// (answered) or the job must be let go (delivered again).
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
        let letter = KafkaProducerMessage(
            topic: configuration.topics.dlq, key: message.key, value: message.value, headers: headers)
        guard
            case .success(_?) = await retrying(
                "publishing a dead letter", ticket, { try await self.producer.send(letter) })
        else { return .redeliver }
        metrics.deadLetter(reason: reason).increment()
        return .answered
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
