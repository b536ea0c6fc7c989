import CRdKafka
import Observability

/// The producer's calls into librdkafka: ``KafkaProducer`` says what it does, this file how.
extension RDKafkaClient {
    /// An idempotent producer whose delivery reports reach each record's callback.
    static func producer(properties: KafkaProperties, logger: Logger) throws -> RDKafkaClient {
        try RDKafkaClient(
            type: RD_KAFKA_PRODUCER, properties: properties, logger: logger,
            configure: { rd_kafka_conf_set_dr_msg_cb($0, deliveryReportCallback) })
    }

    /// Serves delivery reports for up to `waiting` (blocking: the producer's poll thread).
    func serveDeliveryReports(waiting: Duration) { rd_kafka_poll(handle, Int32(clamping: waiting.milliseconds)) }

    /// Fails every record still queued or in flight, to its caller (at close).
    func failEverythingQueued() {
        rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
        rd_kafka_poll(handle, 0)
    }

    var outstanding: Int { Int(rd_kafka_outq_len(handle)) }

    func flushBlocking(timeout: Duration) -> KafkaError? {
        let err = rd_kafka_flush(handle, Int32(clamping: timeout.milliseconds))
        return err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(err)
    }

    func initTransactionsBlocking(timeout: Duration) -> Result<Void, KafkaError> {
        Self.result(rd_kafka_init_transactions(handle, Int32(clamping: timeout.milliseconds)))
    }

    func beginTransactionBlocking() -> Result<Void, KafkaError> { Self.result(rd_kafka_begin_transaction(handle)) }

    func commitTransactionBlocking(timeout: Duration) -> Result<Void, KafkaError> {
        Self.result(rd_kafka_commit_transaction(handle, Int32(clamping: timeout.milliseconds)))
    }

    /// An `rd_kafka_error_t` (nil: success) as a result; destroys it.
    private static func result(_ error: OpaquePointer?) -> Result<Void, KafkaError> {
        guard let error else { return .success(()) }
        return .failure(KafkaError(consuming: error))
    }

    /// Queues one record without waiting; `onDelivery` runs on the poll thread with the broker's answer.
    func produce(
        _ message: OutboundMessage,
        onDelivery: @escaping @Sendable (Result<DeliveryReport, KafkaError>) -> Void
    ) throws(KafkaError) {
        let box = Unmanaged.passRetained(DeliveryBox(topic: message.topic, onDelivery: onDelivery))
        let headers = makeHeaders(message.headers)
        let error = message.topic.withCString { topic in
            message.value.withUnsafeBytes { value in
                withOptionalBytes(message.key) { key in
                    // On the stack: seven entries at most, no array to allocate and grow each record.
                    withUnsafeTemporaryAllocation(of: rd_kafka_vu_t.self, capacity: 7) { vus in
                        var count = 0
                        func add(_ fill: (inout rd_kafka_vu_t) -> Void) {
                            var entry = rd_kafka_vu_t()
                            fill(&entry)
                            vus.initializeElement(at: count, to: entry)
                            count += 1
                        }
                        add {
                            $0.vtype = RD_KAFKA_VTYPE_TOPIC
                            $0.u.cstr = topic
                        }
                        add {
                            $0.vtype = RD_KAFKA_VTYPE_VALUE
                            $0.u.mem.ptr = UnsafeMutableRawPointer(mutating: value.baseAddress)
                            $0.u.mem.size = value.count
                        }
                        add {
                            $0.vtype = RD_KAFKA_VTYPE_MSGFLAGS
                            $0.u.i = RD_KAFKA_MSG_F_COPY
                        }
                        add {
                            $0.vtype = RD_KAFKA_VTYPE_OPAQUE
                            $0.u.ptr = box.toOpaque()
                        }
                        add {
                            $0.vtype = RD_KAFKA_VTYPE_PARTITION
                            $0.u.i32 = message.partition ?? RD_KAFKA_PARTITION_UA
                        }
                        if let key {
                            add {
                                $0.vtype = RD_KAFKA_VTYPE_KEY
                                $0.u.mem.ptr = UnsafeMutableRawPointer(mutating: key.baseAddress)
                                $0.u.mem.size = key.count
                            }
                        }
                        if let headers {
                            add {
                                $0.vtype = RD_KAFKA_VTYPE_HEADERS
                                $0.u.headers = headers
                            }
                        }
                        defer { vus.baseAddress?.deinitialize(count: count) }
                        return rd_kafka_produceva(handle, vus.baseAddress, count)
                    }
                }
            }
        }
        if let error {
            // On failure librdkafka owns neither the headers nor the opaque.
            box.release()
            if let headers { rd_kafka_headers_destroy(headers) }
            throw KafkaError(consuming: error)
        }
    }

    private func makeHeaders(_ headers: [MessageHeader]) -> OpaquePointer? {
        guard !headers.isEmpty, let list = rd_kafka_headers_new(headers.count) else { return nil }
        for header in headers {
            // The name's own bytes with their length: a String passed as a C string is copied to an array first.
            var name = header.name
            name.withUTF8 { name in
                let nameStart = UnsafeRawPointer(name.baseAddress)?.assumingMemoryBound(to: CChar.self)
                header.withValueBytes { value in
                    guard let value else { return _ = rd_kafka_header_add(list, nameStart, name.count, nil, 0) }
                    // An empty value is librdkafka's empty one only with a pointer that is not null: a zero byte's.
                    withUnsafeBytes(of: UInt8(0)) { zero in
                        _ = rd_kafka_header_add(
                            list, nameStart, name.count, value.baseAddress ?? zero.baseAddress, value.count)
                    }
                }
            }
        }
        return list
    }
}

/// What one queued record's delivery report needs: the caller's callback and the topic (kept here so the
/// report costs no C string copy).
private final class DeliveryBox {
    let topic: String
    let onDelivery: @Sendable (Result<DeliveryReport, KafkaError>) -> Void

    init(topic: String, onDelivery: @escaping @Sendable (Result<DeliveryReport, KafkaError>) -> Void) {
        self.topic = topic
        self.onDelivery = onDelivery
    }
}

private let deliveryReportCallback:
    @convention(c) (OpaquePointer?, UnsafePointer<rd_kafka_message_t>?, UnsafeMutableRawPointer?) -> Void = {
        _, message, _ in
        guard let message, let opaque = message.pointee._private else { return }
        let box = Unmanaged<DeliveryBox>.fromOpaque(opaque).takeRetainedValue()
        let err = message.pointee.err
        if err == RD_KAFKA_RESP_ERR_NO_ERROR {
            box.onDelivery(
                .success(
                    DeliveryReport(
                        topic: box.topic, partition: message.pointee.partition, offset: message.pointee.offset)))
        } else {
            box.onDelivery(.failure(KafkaError(err)))
        }
    }

func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
    guard let bytes else { return body(nil) }
    return bytes.withUnsafeBytes { body($0) }
}
