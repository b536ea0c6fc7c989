import Foundation
import Kafka
import KafkaMock
import Lifecycle
import Observability
import Synchronization
import Testing
import Vocabulary

/// A transactional producer's commit marker takes an offset no consumer is handed: only the consumer's position
/// tells the runtime the partition's end is past it (``PartitionOffsets/advance(toPosition:)``). Positions must
/// come also while the member is never idle (other partitions busy), or such a partition looks one job behind for
/// ever: stalled, then restarted in a loop. librdkafka's mock cluster writes no markers, so this shows the
/// positions themselves arriving while busy.
@Suite("Consumer positions on a busy member", .timeLimit(.minutes(1)))
struct ConsumerPositionsTests {
    @Test("a quiet partition's position is reported while another partition keeps the consumer busy")
    func positionsWhileBusy() async throws {
        let cluster = try RuntimeMockClusterTests.Cluster()
        let logger = RuntimeMockClusterTests.logger
        let producer = try KafkaProducer(
            configuration: .init(bootstrapServers: cluster.mock.bootstrapServers), logger: logger)
        // Partition 1 gets ten records a millisecond or so for the whole test, and the consumer fetches every few
        // milliseconds: its poll is never idle for 100 ms.
        let busy = Task {
            var sent = 0
            while !Task.isCancelled {
                for _ in 0..<10 {
                    sent += 1
                    let value = Array("b\(sent)".utf8)
                    Task {
                        _ = try? await producer.send(
                            OutboundMessage(topic: cluster.jobs, partition: 1, key: nil, value: value))
                    }
                }
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
        let consumer = try KafkaConsumer(
            configuration: .init(
                bootstrapServers: cluster.mock.bootstrapServers, groupID: "positions-test",
                properties: cluster.properties.merging(["auto.offset.reset": "earliest", "fetch.wait.max.ms": "5"]) {
                    $1
                }),
            logger: logger)
        try consumer.subscribe(topics: [cluster.jobs])
        let quiet = TopicPartition(topic: cluster.jobs, partition: 0)
        let reported = Mutex<Int64?>(nil)
        let quietWrites = Mutex<Task<Void, Never>?>(nil)
        try? await withDeadline(.seconds(15), timeout: CancellationError()) {
            var busyMessages = 0
            for await event in consumer.events {
                switch event {
                case .message(let message) where message.partition == 1:
                    busyMessages += 1
                    // Once the consumer is busy: three records on the quiet partition, then nothing more there.
                    guard busyMessages == 100 else { break }
                    quietWrites.withLock {
                        $0 = Task {
                            for value in ["t1", "t2", "t3"] {
                                _ = try? await producer.send(
                                    OutboundMessage(
                                        topic: cluster.jobs, partition: 0, key: nil, value: Array(value.utf8)))
                            }
                        }
                    }
                case .positions(let positions):
                    if let position = positions[quiet] { reported.withLock { $0 = position } }
                default: break
                }
                if reported.withLock({ $0 }) == 3 { break }
            }
        }
        #expect(
            reported.withLock { $0 } == 3, "partition 0's position after its three records, while partition 1 was busy")
        busy.cancel()
        _ = await busy.result
        _ = await quietWrites.withLock { $0 }?.value
        consumer.endEvents()
        await consumer.close()
        await producer.close()
    }
}
