import CRdKafka
import Dispatch
import Foundation
import Observability
import Synchronization

/// The consumer's poll thread: polls librdkafka, batches messages, serves rebalances.
final class ConsumerPollLoop: Sendable {
    private let client: RDKafkaClient
    private let channel: EventChannel<KafkaConsumerEvent>
    private let gate: IntakeGate
    private let configuration: KafkaConsumer.Configuration
    private let logger: Logger
    /// Only the poll thread takes it (the rebalance callback runs inside `rd_kafka_consumer_poll`, on that same
    /// thread), so it is never waited for: the lock is there for the compiler, which then sees that nothing else
    /// touches the state. Never held across a librdkafka call that can call back.
    private let state = Mutex(State())

    private struct State {
        var pending: [KafkaConsumerEvent] = []
        var topicNames: [UInt: String] = [:]
        var isClosing = false
        var poller: PollThread?
        /// Positions last handed over, and when they were last read.
        var reportedPositions: [TopicPartition: Int64] = [:]
        var positionsReadAt = ContinuousClock.now
    }

    init(
        client: RDKafkaClient, channel: EventChannel<KafkaConsumerEvent>, gate: IntakeGate,
        configuration: KafkaConsumer.Configuration, logger: Logger
    ) {
        self.client = client
        self.channel = channel
        self.gate = gate
        self.configuration = configuration
        self.logger = logger
    }

    func run(_ poller: PollThread) {
        state.withLock { $0.poller = poller }
        let rk = client.handle
        while poller.isRunning {
            guard let first = rd_kafka_consumer_poll(rk, 100) else {
                reportPositions()
                flush()
                continue
            }
            var taken = take(first)
            // Hand over what is already fetched in one batch, without waiting for more.
            while taken < configuration.batchSize, let next = rd_kafka_consumer_poll(rk, 0) {
                taken = take(next)
            }
            // Also while busy: a partition gone quiet after a transaction's marker, beside others that never are,
            // would otherwise keep its commit one short of its end for ever (stalled, then restarted in a loop).
            reportPositions()
            flush()
        }
        state.withLock { $0.isClosing = true }
        let err = rd_kafka_consumer_close(rk)  // serves the final revocation through `rebalance`
        if err != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("consumer close failed", ["error": KafkaError(err).description])
        }
        state.withLock { $0.poller = nil }
    }

    /// At most every 250 ms: positions that moved without a message (control records of transactional
    /// producers, which a commit would otherwise never pass), queued after every message polled before them (a
    /// position covers only messages already polled), for the next hand-over.
    private func reportPositions() {
        let now = ContinuousClock.now
        let due = state.withLock { state -> Bool in
            guard now - state.positionsReadAt >= .milliseconds(250) else { return false }
            state.positionsReadAt = now
            return true
        }
        guard due else { return }
        var raw: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        guard rd_kafka_assignment(client.handle, &raw) == RD_KAFKA_RESP_ERR_NO_ERROR, let raw else { return }
        let assignment = TopicPartitionList(adopting: raw)
        guard rd_kafka_position(client.handle, assignment.pointer) == RD_KAFKA_RESP_ERR_NO_ERROR else { return }
        let current = assignment.offsets().filter { $0.value >= 0 }  // no position yet: OFFSET_INVALID
        state.withLock { state in
            let moved = current.filter { state.reportedPositions[$0.key] != $0.value }
            state.reportedPositions = current
            if !moved.isEmpty { state.pending.append(.positions(moved)) }
        }
    }

    private func append(_ event: KafkaConsumerEvent) {
        state.withLock { $0.pending.append(event) }
    }

    private func flush() {
        let batch = state.withLock { state -> [KafkaConsumerEvent] in
            defer { state.pending.removeAll(keepingCapacity: true) }
            return state.pending
        }
        if !batch.isEmpty { channel.push(batch) }
    }

    /// Returns how many events wait to be handed over.
    private func take(_ message: UnsafeMutablePointer<rd_kafka_message_t>) -> Int {
        defer { rd_kafka_message_destroy(message) }
        let err = message.pointee.err
        let event: KafkaConsumerEvent?
        if err == RD_KAFKA_RESP_ERR_NO_ERROR {
            event = .message(convert(message))
        } else if err == RD_KAFKA_RESP_ERR__FATAL {
            event = .fatalError(client.fatalError() ?? KafkaError(err))
        } else {
            if err != RD_KAFKA_RESP_ERR__PARTITION_EOF {
                logger.warning("consumer error", ["error": KafkaError(err).description])
            }
            event = nil
        }
        return state.withLock { state in
            if let event { state.pending.append(event) }
            return state.pending.count
        }
    }

    private func convert(_ message: UnsafeMutablePointer<rd_kafka_message_t>) -> InboundMessage {
        let m = message.pointee
        let topic = topicName(m.rkt)
        let value = m.payload.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: m.len)) } ?? []
        let key = m.key.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: m.key_len)) }
        var headers: [MessageHeader] = []
        var list: OpaquePointer?
        if rd_kafka_message_headers(message, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list {
            var index = 0
            var name: UnsafePointer<CChar>?
            var bytes: UnsafeRawPointer?
            var size = 0
            while rd_kafka_header_get_all(list, index, &name, &bytes, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                let headerValue = bytes.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: size)) }
                headers.append(MessageHeader(name: name.map { String(cString: $0) } ?? "", value: headerValue))
                index += 1
            }
        }
        let millis = rd_kafka_message_timestamp(message, nil)
        return InboundMessage(
            topic: topic, partition: m.partition, offset: m.offset, key: key, value: value, headers: headers,
            timestamp: millis >= 0 ? Date(timeIntervalSince1970: Double(millis) / 1000) : nil)
    }

    private func topicName(_ topic: OpaquePointer?) -> String {
        guard let topic else { return "" }
        let address = UInt(bitPattern: topic)  // the address of the topic handle its messages share
        if let name = state.withLock({ $0.topicNames[address] }) { return name }
        let name = String(cString: rd_kafka_topic_name(topic))
        state.withLock { $0.topicNames[address] = name }
        return name
    }

    /// Called by librdkafka inside `rd_kafka_consumer_poll`, on the poll thread.
    func rebalance(
        _ rk: OpaquePointer, _ err: rd_kafka_resp_err_t,
        _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) {
        let cooperative = String(cString: rd_kafka_rebalance_protocol(rk)) == "COOPERATIVE"
        let list = TopicPartitionList.borrowing(partitions)
        // Assigned anew or given up, a partition's next position is news: the runtime's book of it starts
        // again (reported under an earlier assignment, it would be suppressed as unchanged).
        state.withLock { state in for partition in list { state.reportedPositions[partition] = nil } }
        switch err {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            do {
                // The new partitions start in the intake's state (paused or fetching), whatever they were
                // when this member last held them.
                try gate.assign(partitions, client: client) {
                    if cooperative {
                        if let error = rd_kafka_incremental_assign(rk, partitions) {
                            logger.error(
                                "incremental assign failed", ["error": KafkaError(consuming: error).description])
                        }
                    } else {
                        rd_kafka_assign(rk, partitions)
                    }
                }
            } catch {
                logger.error("cannot set the intake state of assigned partitions", ["error": "\(error)"])
            }
            logger.info("partitions assigned", ["partitions": list.map(\.description).joined(separator: ",")])
            append(.partitionsAssigned(list))
            flush()
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            logger.info("partitions revoked", ["partitions": list.map(\.description).joined(separator: ",")])
            if !state.withLock({ $0.isClosing }) {
                waitForCaller(toRelease: list, lost: rd_kafka_assignment_lost(rk) != 0)
            }
            release(partitions) {
                if cooperative {
                    if let error = rd_kafka_incremental_unassign(rk, partitions) {
                        logger.error("incremental unassign failed", ["error": KafkaError(consuming: error).description])
                    }
                } else {
                    rd_kafka_assign(rk, nil)
                }
            }
        default:
            logger.error("rebalance failed", ["error": KafkaError(err).description])
            release(partitions) { rd_kafka_assign(rk, nil) }
        }
    }

    /// Releases partitions without the application's pause, so none comes back to this member paused.
    private func release(
        _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>, unassign: () -> Void
    ) {
        do {
            try gate.release(partitions, client: client, unassign)
        } catch {
            logger.error("cannot resume released partitions", ["error": "\(error)"])
        }
    }

    /// Hands the revocation to the caller and waits for its answer, the timeout, or shutdown.
    private func waitForCaller(toRelease partitions: [TopicPartition], lost: Bool) {
        let acknowledgement = DispatchSemaphore(value: 0)
        append(
            .partitionsRevoked(KafkaRevocation(partitions: partitions, isLost: lost, acknowledgement: acknowledgement)))
        flush()
        let deadline = ContinuousClock.now + configuration.revocationTimeout
        while acknowledgement.wait(timeout: .now() + .milliseconds(50)) == .timedOut {
            if ContinuousClock.now >= deadline {
                logger.warning(
                    "revocation not acknowledged in time; releasing partitions",
                    ["partitions": partitions.map(\.description).joined(separator: ",")])
                return
            }
            if state.withLock({ $0.poller })?.isRunning != true || channel.isFinished { return }
        }
    }
}

extension TopicPartitionList {
    /// The partitions of a list librdkafka owns, copied out.
    static func borrowing(_ pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> [TopicPartition] {
        UnsafeMutableBufferPointer(start: pointer.pointee.elems, count: Int(pointer.pointee.cnt)).map {
            TopicPartition(topic: String(cString: $0.topic), partition: $0.partition)
        }
    }
}

/// librdkafka's rebalance callback: forwards to the consumer's poll loop through the handle's opaque.
let rebalanceCallback:
    @convention(c) (
        OpaquePointer?, rd_kafka_resp_err_t, UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
        UnsafeMutableRawPointer?
    ) -> Void = { rk, err, partitions, opaque in
        guard let rk, let partitions, let opaque else { return }
        let context = Unmanaged<RDKafkaClient.CallbackContext>.fromOpaque(opaque).takeUnretainedValue()
        if let rebalance = context.rebalance {
            rebalance(rk, err, partitions)
        } else {
            rd_kafka_assign(rk, err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS ? partitions : nil)
        }
    }
