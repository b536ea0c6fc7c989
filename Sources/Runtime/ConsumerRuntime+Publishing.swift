import Foundation
import Kafka

extension ConsumerRuntime {
    /// Publishes records, each until the broker acknowledges it (true) or the message must be let go (false).
    func publish(_ records: [OutboundRecord], _ context: HandlingContext) async -> Bool {
        for record in records {
            let message = KafkaProducerMessage(
                topic: record.topic, key: Array(record.key.utf8), value: record.value, headers: record.headers)
            do {
                let report = try await retries.retrying(
                    "publish_result", stage: metrics.publish, isPermanent: Self.isPermanent,
                    letGo: { context.mustLetGo }
                ) { try await self.producer.send(message) }
                logger.debug("published", ["topic": report.topic, "offset": String(report.offset)])
            } catch {
                return false
            }
        }
        return true
    }

    /// Copies the original message to the dead-letter topic with the contract's headers, until the broker
    /// acknowledges it (true) or the message must be let go (false). A message too large for a Kafka record
    /// once the headers are added (a 1 MB job on a topic whose limit is 1 MB) becomes a stub: the same key and
    /// headers, an empty value, `dlq_truncated: true` and `dlq_original_bytes`; the original stays readable at
    /// its source offset while its topic retains it.
    /// Forwards a message unchanged (key, value, headers, and where it came from) to `topic`, where it waits
    /// for its group's room; true once the broker acknowledged it (the original is then answered).
    func park(_ message: KafkaMessage, to topic: String, _ context: HandlingContext) async -> Bool {
        let copy = KafkaProducerMessage(
            topic: topic, key: message.key, value: message.value,
            headers: message.headers + [
                KafkaHeader(name: "parked_from", string: "\(message.topicPartition)@\(message.offset)")
            ])
        do {
            _ = try await retries.retrying(
                "park", stage: nil, isPermanent: Self.isPermanent, letGo: { context.mustLetGo }
            ) { try await self.producer.send(copy) }
            return true
        } catch {
            // Let go (a stop, a revocation), or refused for good: read again by the next owner, or after a
            // restart, and handled then.
            return false
        }
    }

    func deadLetter(_ message: KafkaMessage, _ letter: DeadLetter, _ context: HandlingContext) async -> Bool {
        logger.warning(
            "message dead-lettered",
            [
                "reason": letter.reason, "error": letter.error, "partition": message.topicPartition.description,
                "offset": String(message.offset),
            ])
        let headers = [
            KafkaHeader(name: "dlq_reason", string: letter.reason),
            KafkaHeader(name: "dlq_error", string: letter.error),
            KafkaHeader(name: "dlq_source_topic", string: message.topic),
            KafkaHeader(name: "dlq_source_partition", string: String(message.partition)),
            KafkaHeader(name: "dlq_source_offset", string: String(message.offset)),
            KafkaHeader(name: "dlq_attempts", string: String(letter.attempts)),
        ]
        let topic = configuration.deadLetterTopic
        if message.value.count + (message.key?.count ?? 0) + 4_096 <= configuration.maxRecordBytes {
            let copy = KafkaProducerMessage(topic: topic, key: message.key, value: message.value, headers: headers)
            do {
                _ = try await retries.retrying(
                    "publish_dead_letter", stage: nil, isPermanent: Self.isPermanent, letGo: { context.mustLetGo }
                ) { try await self.producer.send(copy) }
                metrics.deadLetter(reason: letter.reason).increment()
                return true
            } catch is LetGo {
                return false
            } catch {
                // The broker's own limit is lower: send the stub below.
            }
        }
        let stub = KafkaProducerMessage(
            topic: topic, key: message.key, value: [],
            headers: headers + [
                KafkaHeader(name: "dlq_truncated", string: "true"),
                KafkaHeader(name: "dlq_original_bytes", string: String(message.value.count)),
            ])
        do {
            _ = try await retries.retrying(
                "publish_dead_letter", stage: nil, isPermanent: Self.isPermanent, letGo: { context.mustLetGo }
            ) { try await self.producer.send(stub) }
        } catch {
            return false
        }
        logger.warning(
            "dead letter too large for a record: sent as a stub",
            ["bytes": String(message.value.count), "offset": String(message.offset)])
        metrics.deadLetter(reason: letter.reason).increment()
        return true
    }

    /// The broker's errors that no retry heals (a record too large).
    static func isPermanent(_ error: any Error) -> Bool { (error as? KafkaError)?.isPermanent == true }
}
