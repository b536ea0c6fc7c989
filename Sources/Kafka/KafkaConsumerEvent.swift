import Dispatch
import Synchronization

/// What a consumer hands its caller, in the order it happened.
public enum KafkaConsumerEvent: Sendable {
    case message(InboundMessage)
    /// These partitions are now this member's; their messages follow.
    case partitionsAssigned([TopicPartition])
    /// These partitions are about to be released. They stay assigned until ``KafkaRevocation/done()`` is
    /// called (or the revocation timeout passes), so in-flight work can be drained and committed first.
    case partitionsRevoked(KafkaRevocation)
    /// The consumer's position moved past records it never hands over (a transaction's commit or abort
    /// marker): for each partition, the offset of the next record it will read. Every message before it was
    /// handed over before this event. Sent when the consumer is idle and a position moved.
    case positions([TopicPartition: Int64])
    /// The consumer is unusable and must be closed.
    case fatalError(KafkaError)
}

/// A pending release of partitions. Call ``done()`` once their in-flight work is committed or abandoned.
public final class KafkaRevocation: Sendable {
    public let partitions: [TopicPartition]
    /// True when the partitions were lost rather than handed over (the session timed out): another member
    /// may own them already, and commits for them will fail.
    public let isLost: Bool
    private let acknowledgement: DispatchSemaphore
    private let acknowledged = Atomic<Bool>(false)

    init(partitions: [TopicPartition], isLost: Bool, acknowledgement: DispatchSemaphore) {
        self.partitions = partitions
        self.isLost = isLost
        self.acknowledgement = acknowledgement
    }

    /// Lets the consumer release the partitions. Calling it again does nothing.
    public func done() {
        if !acknowledged.exchange(true, ordering: .acquiringAndReleasing) { acknowledgement.signal() }
    }

    deinit {
        done()  // a caller that drops the event without answering must not stall the group
    }
}

/// The events of one consumer, as an async sequence with one reader at a time.
public struct KafkaConsumerEvents: AsyncSequence, Sendable {
    public typealias Element = KafkaConsumerEvent
    let channel: EventChannel<KafkaConsumerEvent>

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(channel: channel) }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let channel: EventChannel<KafkaConsumerEvent>
        private var batch: [KafkaConsumerEvent] = []
        private var index = 0

        init(channel: EventChannel<KafkaConsumerEvent>) { self.channel = channel }

        public mutating func next() async -> KafkaConsumerEvent? {
            if index == batch.count {
                guard let next = await channel.next() else { return nil }
                batch = next
                index = 0
            }
            defer { index += 1 }
            return batch[index]
        }
    }
}
