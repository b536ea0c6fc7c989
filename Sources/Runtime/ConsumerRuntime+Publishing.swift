import Foundation
import Kafka
import Observability
import Synchronization
import Vocabulary

extension ConsumerRuntime {
    /// How publishing a message's records ended.
    enum Publishing {
        case published
        /// The message must be let go: the worker stops, or its partition moved (or the producer failed for good).
        case letGo
        /// The broker refused a record for good (over the topic's `max.message.bytes`, an invalid record).
        case refused(any Error)
    }

    /// Publishes records, each until the broker acknowledges it, the message must be let go, or the broker refuses
    /// it for good. Each carries the consumed message's trace context (``TraceContext``), when it has one; when the
    /// worker traces (a sampled `process` span), the context of its own `send` span instead, so that a grant
    /// service's span is the worker's child (its `tracestate` carried on).
    func publish(_ records: [OutboundRecord], _ context: any HandlingContext) async -> Publishing {
        let consumed = TraceContext(headers: context.message.headers)
        let beginsTrace = routeIndex[context.message.topic].map { configuration.routes[$0].beginsTraces } ?? false
        for record in records {
            let send = context.span.map { span in
                span.child(
                    "send \(record.topic)", kind: .producer,
                    attributes: [
                        ("messaging.system", .string("kafka")), ("messaging.operation.type", .string("send")),
                        ("messaging.destination.name", .string(record.topic)),
                    ])
            }
            var trace = consumed?.headers ?? []
            // Recorded: the worker's span is the parent. Not recorded in a trace that begins here (a notification's):
            // the worker's unsampled context, so that nobody downstream records a trace whose root nobody recorded.
            let carried: SpanContext? =
                if let send, send.context.sampled || beginsTrace {
                    send.context
                } else if beginsTrace, let named = consumed?.parent {
                    // Not traced here at all: the trace goes on, said not recorded.
                    SpanContext(traceID: named.traceID, spanID: named.spanID, sampled: false)
                } else {
                    nil
                }
            if let carried {
                trace =
                    [MessageHeader(name: "traceparent", string: carried.traceparent)]
                    + (consumed?.tracestate.map { [MessageHeader(name: "tracestate", string: $0)] } ?? [])
            }
            let message = OutboundMessage(
                topic: record.topic, key: Array(record.key.utf8), value: record.value,
                headers: record.headers.filter { $0.name != "traceparent" && $0.name != "tracestate" } + trace)
            do {
                let report = try await retries.retrying(
                    "publish_result", stage: metrics.publish, isPermanent: Self.isPermanent,
                    letGo: { context.mustLetGo }
                ) { try await self.producer.send(message) }
                send?.end()
                logger.debug("published", ["topic": report.topic, "offset": String(report.offset)])
            } catch {
                var failure = error
                // The broker refuses a whole batch for one record too large for its topic: a record refused
                // beside others is sent once more, alone in a batch of its own, before it counts as refused. Retried
                // as the first send was: a timeout on that send is no reason to let the message go while its
                // partition is still this replica's (it would hold the partition's commits until a restart).
                if Self.isRefusal(failure) {
                    do {
                        _ = try await retries.retrying(
                            "publish_result", stage: metrics.publish, isPermanent: Self.isPermanent,
                            letGo: { context.mustLetGo }
                        ) { try await self.producer.send(message) }
                        send?.end()
                        continue
                    } catch {
                        failure = error
                    }
                }
                send?.fail("\(failure)")
                send?.end()
                stopIfFatal(failure)
                return Self.isRefusal(failure) ? .refused(failure) : .letGo
            }
        }
        return .published
    }

    /// How forwarding a message to the park topic ended.
    enum Parking { case parked, letGo, failed }

    /// Forwards a message unchanged (key, value, headers, and `parked_from`: where it came from) to `topic`
    /// (its lane's `partition`), where it waits for its group's room. One attempt: parking only spares memory and the other groups, so
    /// a copy the broker refuses (too large, not authorised, the broker away) is no reason to hold the message;
    /// `.failed` has it handled in place instead.
    func park(
        _ message: InboundMessage, to topic: String, partition: Int32?, waitStartedAt: Date?,
        _ context: any HandlingContext
    ) async -> Parking {
        guard !context.mustLetGo else { return .letGo }
        guard message.value.count + (message.key?.count ?? 0) + 4_096 <= configuration.maxRecordBytes else {
            return .failed
        }
        // Where its wait began goes with it (the first park's, parked again), so the wait counts from the send.
        // Clamped: the start is the record's CreateTime, which a producer may set near Int64.max.
        let waited = waitStartedAt.map {
            MessageHeader(
                name: WaitStart.parkedHeader, string: String(EpochMilliseconds.of($0, rounding: .towardZero)))
        }
        let copy = OutboundMessage(
            topic: topic, partition: partition, key: message.key, value: message.value,
            headers: message.headers.filter { $0.name != ParkedOrigin.header && $0.name != WaitStart.parkedHeader }
                + [ParkedOrigin(message).messageHeader] + (waited.map { [$0] } ?? []))
        let started = ContinuousClock.now
        do {
            _ = try await producer.send(copy)
            metrics.publish.observe(ContinuousClock.now - started)
            return .parked
        } catch {
            // The producer failed for good: the runtime stops, and the message is let go, not handled in place
            // (Apple asked, the ledger written) only to find its answer cannot be sent.
            if Self.isFatal(error) {
                stopIfFatal(error)
                return .letGo
            }
            metrics.failure("park").increment()
            if state.withLock({ $0.parkFailed(at: .now) }) {
                logger.warning(
                    "cannot park a message; it is handled in place (said once every 30 s)",
                    ["topic": topic, "error": "\(error)"])
            }
            return .failed
        }
    }

    /// Copies the original message to the dead-letter topic with the contract's headers, until the broker
    /// acknowledges it (true) or the message must be let go (false). A message too large for a Kafka record
    /// once the headers are added (a 1 MB job on a topic whose limit is 1 MB) becomes a stub: the same key and
    /// headers, an empty value, `dlq_truncated: true` and `dlq_original_bytes`; the original stays readable at
    /// its source offset while its topic retains it. A stub refused too is sent bare: keyed by the original's
    /// place, with the `dlq_*` headers alone.
    func deadLetter(
        _ message: InboundMessage, _ letter: DeadLetter, _ context: any HandlingContext, group: String
    ) async -> Bool {
        let trace = TraceContext(headers: message.headers)
        logger.warning(
            "message dead-lettered",
            [
                "reason": letter.reason.rawValue, "error": letter.error,
                "partition": message.topicPartition.description,
                "offset": String(message.offset), "trace_id": trace?.traceID ?? "",
            ])
        let headers =
            (trace?.headers ?? []) + [
                MessageHeader(name: DeadLetterHeader.reason, string: letter.reason.rawValue),
                MessageHeader(name: DeadLetterHeader.error, string: letter.error),
                MessageHeader(name: DeadLetterHeader.sourceTopic, string: message.topic),
                MessageHeader(name: DeadLetterHeader.sourcePartition, string: String(message.partition)),
                MessageHeader(name: DeadLetterHeader.sourceOffset, string: String(message.offset)),
                MessageHeader(name: DeadLetterHeader.attempts, string: String(letter.attempts)),
            ]
            // A parked message was first read elsewhere: where, so a dead letter leads back to the original.
            + (message.topic == configuration.parking?.topic
                ? message.headers.filter { $0.name == ParkedOrigin.header } : [])
            // A replayed one too (as the worker writes it, nothing a producer made up): a replay of this letter
            // keeps the original's place.
            + (DeadLetterHeader.validFirstRead(message).map {
                [MessageHeader(name: DeadLetterHeader.firstRead, string: $0)]
            } ?? [])
        let topic = configuration.deadLetterTopic
        if message.value.count + (message.key?.count ?? 0) + 4_096 <= configuration.maxRecordBytes {
            // What the record is (a subscription's status, a policy's answer), so a replay reads it as it was. Not
            // on a stub below: a stub is never replayed.
            let copy = OutboundMessage(
                topic: topic, key: message.key, value: message.value,
                headers: headers + DeadLetterHeader.kept(from: message.headers))
            do {
                _ = try await retries.retrying(
                    "publish_dead_letter", stage: nil, isPermanent: Self.isPermanent, letGo: { context.mustLetGo }
                ) { try await self.producer.send(copy) }
                metrics.deadLetter(reason: letter.reason, group: group).increment()
                return true
            } catch is LetGo {
                return false
            } catch let error as KafkaError where error.isFatal {
                stopIfFatal(error)
                return false
            } catch {
                // The broker's own limit is lower: send the stub below.
            }
        }
        let truncated = [
            MessageHeader(name: DeadLetterHeader.truncated, string: "true"),
            MessageHeader(name: DeadLetterHeader.originalBytes, string: String(message.value.count)),
        ]
        let stub = OutboundMessage(topic: topic, key: message.key, value: [], headers: headers + truncated)
        // Refused even so (a key past the broker's limit, a compacted topic and a message without a key): sent
        // bare, keyed by where the original was read, with the dlq_* headers alone. Left unanswered instead, the
        // message would hold its partition's commits until the liveness probe restarted the replica, and the
        // next replica to take the partition the same way.
        let bare = OutboundMessage(
            topic: topic, key: Array(ParkedOrigin(message).text.utf8), value: [],
            headers: headers.filter { $0.name.hasPrefix("dlq_") } + truncated)
        for (attempt, record) in [stub, bare].enumerated() {
            do {
                _ = try await retries.retrying(
                    "publish_dead_letter", stage: nil, isPermanent: Self.isPermanent, letGo: { context.mustLetGo }
                ) { try await self.producer.send(record) }
                break
            } catch {
                stopIfFatal(error)
                guard Self.isRefusal(error) else { return false }
                if attempt == 1 {
                    // A dead-letter topic that refuses a few hundred bytes keyed by a short text: its configuration.
                    logger.critical(
                        "the dead-letter topic refuses even a bare stub: the message is left unanswered, its"
                            + " partition's commits held until a restart",
                        [
                            "topic": topic, "error": "\(error)", "partition": message.topicPartition.description,
                            "offset": String(message.offset),
                        ])
                    return false
                }
            }
        }
        logger.warning(
            "dead letter too large for a record: sent as a stub",
            ["bytes": String(message.value.count), "offset": String(message.offset)])
        metrics.deadLetter(reason: letter.reason, group: group).increment()
        return true
    }

    /// The broker's errors that no retry heals (a record too large).
    static func isPermanent(_ error: any Error) -> Bool { (error as? KafkaError)?.isPermanent == true }

    /// A fatal client error: the producer can send nothing again.
    static func isFatal(_ error: any Error) -> Bool { (error as? KafkaError)?.isFatal == true }

    /// The broker refused a record for good while the producer still works (a fatal error can carry a permanent
    /// code too: that one is let go, the process restarting, never dead-lettered).
    static func isRefusal(_ error: any Error) -> Bool { isPermanent(error) && !isFatal(error) }

    /// Ends the runtime when a send failed because the producer did (``producerFailed(_:)``).
    func stopIfFatal(_ error: any Error) {
        if let error = error as? KafkaError, error.isFatal { producerFailed(error) }
    }
}
