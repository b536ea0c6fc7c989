import Foundation
public import Observability
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
            try librdkafkaProperties().validate()
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
    /// The senders inside ``enqueue(_:onDelivery:)`` (the low bits) and whether ``close(timeout:)`` has begun
    /// (``closedFlag``). A sender counts itself in before it reads the flag, and close waits for those counted in
    /// before it flushes: checked and queued apart, a record could be queued after the poll thread's last purge, and
    /// its sender would wait forever. Not a lock: every job's result passes here, and senders on the cooperative
    /// threads contended for one (its slow path, a futex, was about 2 % of a receipt job's CPU).
    private let gate = Atomic<Int>(0)
    private static let closedFlag = 1 << 62
    private let deliveryTimeout: Duration

    public init(configuration: Configuration, logger: Logger) throws {
        let client = try RDKafkaClient.producer(properties: configuration.librdkafkaProperties(), logger: logger)
        self.client = client
        self.deliveryTimeout = configuration.deliveryTimeout
        // A thread, not a task: delivery reports must flow from the first send, and the poll blocks.
        self.poller = PollThread(name: "kafka-produce") { poller in
            while poller.isRunning { client.serveDeliveryReports(waiting: .milliseconds(100)) }
            // Whatever is still queued fails now, so no caller waits forever.
            client.failEverythingQueued()
        }
    }

    deinit {
        poller.stop()
    }

    /// Starts the transactional session of a producer configured with `transactional.id` (as a backend's
    /// outbox relay or a Kafka Streams application writes jobs): fences an older instance with the same id.
    public func initTransactions(timeout: Duration = .seconds(30)) async throws {
        let client = self.client
        try await Blocking.run { client.initTransactionsBlocking(timeout: timeout) }.get()
    }

    /// Begins a transaction: what is sent until ``commitTransaction(timeout:)`` becomes visible together.
    public func beginTransaction() async throws {
        let client = self.client
        try await Blocking.run { client.beginTransactionBlocking() }.get()
    }

    /// Commits the transaction: its records, and a commit marker after them in each partition.
    public func commitTransaction(timeout: Duration = .seconds(30)) async throws {
        let client = self.client
        try await Blocking.run { client.commitTransactionBlocking(timeout: timeout) }.get()
    }

    /// A fabricated fatal error (librdkafka's test hook), for tests of what follows one: sends fail with it.
    package func raiseFatalErrorForTesting(_ reason: String) { client.raiseFatalErrorForTesting(reason) }

    /// librdkafka's fatal error for this producer (its idempotent session broken for good), or nil: once set, no
    /// record can be sent again by this instance.
    public var fatalError: KafkaError? { client.fatalError() }

    /// Records waiting to be sent or acknowledged.
    public var outstanding: Int { client.outstanding }

    /// Sends one record and returns once the broker has acknowledged it.
    ///
    /// When librdkafka's local queue is full, waits for room up to the delivery timeout.
    public func send(_ message: OutboundMessage) async throws -> DeliveryReport {
        var deadline: ContinuousClock.Instant?  // read the clock only once the queue is full
        while true {
            do {
                // Resumed once: by the delivery report, or here when the record is not queued (librdkafka then
                // never calls back). Unsafe, not checked: a checked one's canary is an allocation a record.
                return try await withUnsafeThrowingContinuation { continuation in
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
    /// Throws at once when the record cannot be queued (``KafkaError/Code/queueFull`` is retriable). Not inlined:
    /// in ``send(_:)``'s async frame, its argument list for librdkafka (on the stack here) would be allocated from
    /// the task's allocator at every send.
    @inline(never)
    public func enqueue(
        _ message: OutboundMessage,
        onDelivery: @escaping @Sendable (Result<DeliveryReport, KafkaError>) -> Void
    ) throws(KafkaError) {
        let before = gate.wrappingAdd(1, ordering: .sequentiallyConsistent).oldValue
        defer { gate.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
        guard before & Self.closedFlag == 0 else { throw .closed }
        try client.produce(message, onDelivery: onDelivery)
    }

    /// Waits until every queued record is acknowledged or failed.
    public func flush(timeout: Duration) async throws {
        let client = self.client
        if let error = await Blocking.run({ client.flushBlocking(timeout: timeout) }) { throw error }
    }

    /// Stops taking records, flushes for up to `timeout`, fails whatever is left, and stops polling.
    public func close(timeout: Duration = .seconds(10)) async {
        let before = gate.bitwiseOr(Self.closedFlag, ordering: .sequentiallyConsistent).oldValue
        guard before & Self.closedFlag == 0 else { return }
        // Senders counted in before the flag was set may still be queuing: a call of librdkafka's that never blocks.
        while gate.load(ordering: .sequentiallyConsistent) != Self.closedFlag {
            do { try await Task.sleep(for: .microseconds(100)) } catch { await Task.yield() }  // cancelled: no sleep
        }
        try? await flush(timeout: timeout)  // What did not flush is failed to its callers just below.
        await poller.stopAndJoin()
    }
}
