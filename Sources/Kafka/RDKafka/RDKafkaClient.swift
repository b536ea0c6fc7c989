import CRdKafka
import Foundation
import Observability
import Synchronization

/// Owns one `rd_kafka_t` and destroys it in `deinit`. C types stop here and in the producer and consumer.
///
/// `@unchecked Sendable`: the handle is an immutable pointer, and librdkafka's API is thread-safe for every
/// call this layer makes on it; the callback context is immutable after init.
final class RDKafkaClient: @unchecked Sendable {
    let handle: OpaquePointer
    let context: CallbackContext

    /// What C callbacks need, reached through `rd_kafka_opaque`. Owned here, so it outlives the handle.
    final class CallbackContext: Sendable {
        typealias Rebalance =
            @Sendable (
                OpaquePointer, rd_kafka_resp_err_t, UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
            ) -> Void

        let logger: Logger
        private let rebalanceHandler = Mutex<Rebalance?>(nil)

        /// Set by the consumer before it subscribes; called on the poll thread at each rebalance.
        var rebalance: Rebalance? {
            get { rebalanceHandler.withLock { $0 } }
            set { rebalanceHandler.withLock { $0 = newValue } }
        }

        init(logger: Logger) { self.logger = logger }
    }

    init(
        type: rd_kafka_type_t, properties: KafkaProperties, logger: Logger,
        configure: (OpaquePointer) -> Void = { _ in }
    ) throws(KafkaError) {
        let conf = try properties.makeConf()
        let context = CallbackContext(logger: logger)
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(context).toOpaque())
        rd_kafka_conf_set_log_cb(conf, logCallback)
        configure(conf)
        var errstr = [CChar](repeating: 0, count: 512)
        // rd_kafka_new takes ownership of conf on success only.
        guard let handle = rd_kafka_new(type, conf, &errstr, errstr.count) else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError(code: .invalidConfiguration, reason: errstr.string)
        }
        self.handle = handle
        self.context = context
    }

    deinit {
        rd_kafka_destroy(handle)
    }

    /// librdkafka's `rd_kafka_test_fatal_error`: a fabricated fatal error, raised as a real one would be.
    func raiseFatalErrorForTesting(_ reason: String) {
        _ = rd_kafka_test_fatal_error(handle, RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID, reason)
    }

    /// The instance's fatal error, if librdkafka raised one.
    func fatalError() -> KafkaError? {
        var errstr = [CChar](repeating: 0, count: 512)
        let err = rd_kafka_fatal_error(handle, &errstr, errstr.count)
        guard err != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return KafkaError(code: .init(err), reason: errstr.string, isFatal: true)
    }
}

/// librdkafka's log lines, routed to the project's logger. Runs on librdkafka's threads.
private let logCallback: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Void =
    { rk, level, facility, message in
        guard let rk, let opaque = rd_kafka_opaque(rk) else { return }
        let context = Unmanaged<RDKafkaClient.CallbackContext>.fromOpaque(opaque).takeUnretainedValue()
        let mapped: Logger.Level =
            switch level {
            case ...2: .critical
            case 3: .error
            case 4: .warning
            case 5: .notice
            case 6: .info
            default: .debug
            }
        context.logger.log(
            mapped, message.map { String(cString: $0) } ?? "",
            [
                "source": "librdkafka", "facility": facility.map { String(cString: $0) } ?? "",
                "client": String(cString: rd_kafka_name(rk)),
            ])
    }

extension Array where Element == CChar {
    /// A NUL-terminated error buffer filled by librdkafka, as text.
    var string: String { withUnsafeBufferPointer { String(cString: $0.baseAddress!) } }
}
