import CRdKafka
import Foundation
import Observability
import Synchronization

/// An idempotent Kafka producer (`enable.idempotence=true`, `acks=all`).
///
/// `send` returns when the broker has acknowledged the record, or throws a ``KafkaError``. A dedicated
/// thread serves librdkafka's delivery reports from the moment the producer exists.
public final class KafkaProducer: Sendable {
    public struct Configuration: Sendable {
        /// `bootstrap.servers`.
        public var bootstrapServers: String
        /// How long librdkafka tries to deliver a record before failing it (`message.timeout.ms`). Default: 30 s.
        public var deliveryTimeout: Duration = .seconds(30)
        /// How long records wait to be batched together (`linger.ms`). Default: 5 ms.
        public var linger: Duration = .milliseconds(5)
        /// Any librdkafka property, passed through; it wins over the fields above. Idempotence and `acks=all`
        /// cannot be turned off: the worker's guarantees rest on them.
        public var properties: [String: String] = [:]

        public init(bootstrapServers: String, properties: [String: String] = [:]) {
            self.bootstrapServers = bootstrapServers
            self.properties = properties
        }

        /// Checks the configuration as the client's creation would, without creating a client (nothing
        /// connects): guarded properties, unknown librdkafka properties, invalid values.
        public func validate() throws(KafkaError) {
            rd_kafka_conf_destroy(try librdkafkaProperties().makeConf())
        }

        /// The properties librdkafka is given, in order (the guarded ones checked): for `check-config --print`.
        public func effectiveProperties() throws(KafkaError) -> [(key: String, value: String)] {
            try librdkafkaProperties().entries
        }

        func librdkafkaProperties() throws(KafkaError) -> KafkaProperties {
            let required = ["enable.idempotence": "true", "acks": "all"]
            for (key, value) in required
            where properties[key].map({ $0 != value && !($0 == "-1" && key == "acks") }) == true {
                throw .invalidConfiguration(key: key, reason: "must be \(value): no record may be lost or duplicated")
            }
            return KafkaProperties(
                [
                    ("bootstrap.servers", bootstrapServers),
                    ("message.timeout.ms", String(deliveryTimeout.milliseconds)),
                    ("linger.ms", String(linger.milliseconds)),
                    ("enable.idempotence", "true"), ("acks", "all"),
                ], overrides: properties)
        }
    }

    private let client: RDKafkaClient
    private let poller: PollThread
    private let closed = Atomic<Bool>(false)
    private let deliveryTimeout: Duration

    public init(configuration: Configuration, logger: Logger) throws {
        let client = try RDKafkaClient(
            type: RD_KAFKA_PRODUCER, properties: configuration.librdkafkaProperties(), logger: logger,
            configure: { rd_kafka_conf_set_dr_msg_cb($0, deliveryReportCallback) })
        self.client = client
        self.deliveryTimeout = configuration.deliveryTimeout
        // A thread, not a task: delivery reports must flow from the first send, and the poll blocks.
        self.poller = PollThread(name: "kafka-producer-poll") { poller in
            while poller.isRunning {
                rd_kafka_poll(client.handle, 100)
            }
            // Whatever is still queued fails now, so no caller waits forever.
            rd_kafka_purge(client.handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
            rd_kafka_poll(client.handle, 0)
        }
    }

    deinit {
        poller.stop()
    }

    /// Starts the transactional session of a producer configured with `transactional.id` (as a backend's
    /// outbox relay or a Kafka Streams application writes jobs): fences an older instance with the same id.
    public func initTransactions(timeout: Duration = .seconds(30)) async throws {
        let client = self.client
        try await Self.check { rd_kafka_init_transactions(client.handle, Int32(clamping: timeout.milliseconds)) }
    }

    /// Begins a transaction: what is sent until ``commitTransaction(timeout:)`` becomes visible together.
    public func beginTransaction() async throws {
        let client = self.client
        try await Self.check { rd_kafka_begin_transaction(client.handle) }
    }

    /// Commits the transaction: its records, and a commit marker after them in each partition.
    public func commitTransaction(timeout: Duration = .seconds(30)) async throws {
        let client = self.client
        try await Self.check { rd_kafka_commit_transaction(client.handle, Int32(clamping: timeout.milliseconds)) }
    }

    /// Runs a blocking transactional call off the cooperative pool; throws its error, if any.
    private static func check(_ call: @escaping @Sendable () -> OpaquePointer?) async throws {
        let error = await Blocking.run { call().map(ErrorHandle.init) }
        if let error { throw KafkaError(consuming: error.pointer) }
    }

    /// An `rd_kafka_error_t` handed from the blocking thread to the caller, who destroys it.
    private struct ErrorHandle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    /// Records waiting to be sent or acknowledged.
    public var outstanding: Int { Int(rd_kafka_outq_len(client.handle)) }

    /// Sends one record and returns once the broker has acknowledged it.
    ///
    /// When librdkafka's local queue is full, waits for room up to the delivery timeout.
    public func send(_ message: KafkaProducerMessage) async throws -> KafkaDeliveryReport {
        var deadline: ContinuousClock.Instant?  // read the clock only once the queue is full
        while true {
            do {
                return try await withCheckedThrowingContinuation { continuation in
                    do {
                        try enqueue(message) { continuation.resume(with: $0) }
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            } catch let error as KafkaError where error.code == .queueFull {
                let now = ContinuousClock.now
                let giveUpAt = deadline ?? now + deliveryTimeout
                guard now < giveUpAt else { throw error }
                deadline = giveUpAt
                try await Task.sleep(for: .milliseconds(1))
            }
        }
    }

    /// Queues one record without waiting; `onDelivery` runs on the poll thread with the broker's answer.
    ///
    /// Throws at once when the record cannot be queued (``KafkaError/Code/queueFull`` is retriable).
    public func enqueue(
        _ message: KafkaProducerMessage,
        onDelivery: @escaping @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void
    ) throws(KafkaError) {
        guard !closed.load(ordering: .acquiring) else { throw .closed }
        let box = Unmanaged.passRetained(DeliveryBox(topic: message.topic, onDelivery: onDelivery))
        let headers = makeHeaders(message.headers)
        let error = message.topic.withCString { topic in
            message.value.withUnsafeBytes { value in
                withOptionalBytes(message.key) { key in
                    var vus = [rd_kafka_vu_t](repeating: rd_kafka_vu_t(), count: 5)
                    vus[0].vtype = RD_KAFKA_VTYPE_TOPIC
                    vus[0].u.cstr = topic
                    vus[1].vtype = RD_KAFKA_VTYPE_VALUE
                    vus[1].u.mem.ptr = UnsafeMutableRawPointer(mutating: value.baseAddress)
                    vus[1].u.mem.size = value.count
                    vus[2].vtype = RD_KAFKA_VTYPE_MSGFLAGS
                    vus[2].u.i = RD_KAFKA_MSG_F_COPY
                    vus[3].vtype = RD_KAFKA_VTYPE_OPAQUE
                    vus[3].u.ptr = box.toOpaque()
                    vus[4].vtype = RD_KAFKA_VTYPE_PARTITION
                    vus[4].u.i32 = message.partition ?? RD_KAFKA_PARTITION_UA
                    if let key {
                        var entry = rd_kafka_vu_t()
                        entry.vtype = RD_KAFKA_VTYPE_KEY
                        entry.u.mem.ptr = UnsafeMutableRawPointer(mutating: key.baseAddress)
                        entry.u.mem.size = key.count
                        vus.append(entry)
                    }
                    if let headers {
                        var entry = rd_kafka_vu_t()
                        entry.vtype = RD_KAFKA_VTYPE_HEADERS
                        entry.u.headers = headers
                        vus.append(entry)
                    }
                    return rd_kafka_produceva(client.handle, vus, vus.count)
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

    /// Waits until every queued record is acknowledged or failed.
    public func flush(timeout: Duration) async throws {
        let client = self.client
        let err = await Blocking.run { rd_kafka_flush(client.handle, Int32(clamping: timeout.milliseconds)) }
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(err) }
    }

    /// Stops taking records, flushes for up to `timeout`, fails whatever is left, and stops polling.
    public func close(timeout: Duration = .seconds(10)) async {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        try? await flush(timeout: timeout)  // What did not flush is failed to its callers just below.
        await poller.stopAndJoin()
    }

    private func makeHeaders(_ headers: [KafkaHeader]) -> OpaquePointer? {
        guard !headers.isEmpty, let list = rd_kafka_headers_new(headers.count) else { return nil }
        for header in headers {
            if let value = header.value {
                value.withUnsafeBytes { _ = rd_kafka_header_add(list, header.name, -1, $0.baseAddress, $0.count) }
            } else {
                rd_kafka_header_add(list, header.name, -1, nil, 0)
            }
        }
        return list
    }
}

/// What one queued record's delivery report needs: the caller's callback and the topic (kept here so the
/// report costs no C string copy).
private final class DeliveryBox {
    let topic: String
    let onDelivery: @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void

    init(topic: String, onDelivery: @escaping @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void) {
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
                    KafkaDeliveryReport(
                        topic: box.topic, partition: message.pointee.partition, offset: message.pointee.offset)))
        } else {
            box.onDelivery(.failure(KafkaError(err)))
        }
    }

func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
    guard let bytes else { return body(nil) }
    return bytes.withUnsafeBytes { body($0) }
}
