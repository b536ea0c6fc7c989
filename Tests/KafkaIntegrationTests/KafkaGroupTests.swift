import Foundation
import Kafka
import TestSupport
import Testing
import CRdKafka
import Synchronization

@Suite("Kafka consumer groups against a real broker", .timeLimit(.minutes(3)))
struct KafkaGroupTests {
    @Test(
        "two members split the partitions, one takes over when the other leaves, no message is lost",
        arguments: ["range,roundrobin", "cooperative-sticky"])
    func splitAndTakeOver(strategy: String) async throws {
        let topic = try await TestBroker.makeTopic(partitions: 4)
        let group = "g-\(UUID())"
        let producer = try TestBroker.producer()
        let all = Set((0..<4).map { TopicPartition(topic: topic, partition: Int32($0)) })

        let first = EventRecorder(try TestBroker.consumer(group: group, strategy: strategy))
        try first.consumer.subscribe(topics: [topic])
        #expect(await eventually { first.assigned == all })

        let second = EventRecorder(try TestBroker.consumer(group: group, strategy: strategy))
        try second.consumer.subscribe(topics: [topic])
        #expect(await eventually { !second.assigned.isEmpty && first.assigned.union(second.assigned) == all })
        #expect(first.assigned.isDisjoint(with: second.assigned))
        #expect(!first.assigned.isEmpty)

        try await TestBroker.send(producer, topic: topic, count: 200, prefix: "a")
        #expect(await eventually { first.values.union(second.values).count == 200 })
        #expect(!first.messages.isEmpty && !second.messages.isEmpty)

        await second.stop()
        #expect(await eventually { first.assigned == all })
        try await TestBroker.send(producer, topic: topic, count: 200, prefix: "b")
        #expect(await eventually { first.values.union(second.values).count == 400 })
        await first.stop()

        let expected = Set((0..<200).map { "a-\($0)" } + (0..<200).map { "b-\($0)" })
        #expect(first.values.union(second.values) == expected)
        #expect(first.state.withLock { $0.commitErrors }.isEmpty)
        await producer.close()
    }

    @Test("a revocation reaches the caller before the partitions are released, and commits still work then")
    func revocationIsHandedOverFirst() async throws {
        let topic = try await TestBroker.makeTopic(partitions: 2)
        let group = "g-\(UUID())"
        let producer = try TestBroker.producer()
        try await TestBroker.send(producer, topic: topic, count: 20, prefix: "r")

        // The first member holds its revocation for 3 s, committing inside it as a drain would.
        let first = EventRecorder(try TestBroker.consumer(group: group), holdRevocation: .seconds(3))
        try first.consumer.subscribe(topics: [topic])
        #expect(await eventually { first.values.count == 20 })

        let second = EventRecorder(try TestBroker.consumer(group: group))
        try second.consumer.subscribe(topics: [topic])
        #expect(await eventually { !first.state.withLock { $0.revocations }.isEmpty })
        let revokedAt = try #require(first.state.withLock { $0.revokedAt.first })
        // While the first member holds the revocation, the group cannot hand anything to the second.
        #expect(await eventually { !second.assigned.isEmpty })
        #expect(ContinuousClock.now - revokedAt >= .seconds(2.5))
        #expect(first.state.withLock { $0.commitErrors }.isEmpty)

        await second.stop()
        await first.stop()
        await producer.close()
    }

    /// librdkafka keeps an application pause across a revoke and a re-assign: a partition paused, revoked and
    /// handed back to the same member was never fetched again.
    @Test(
        "a partition paused, revoked and handed back follows the intake: paused while it is, read once resumed",
        arguments: ["range,roundrobin", "cooperative-sticky"])
    func pausedPartitionHandedBack(strategy: String) async throws {
        let topic = try await TestBroker.makeTopic(partitions: 2)
        let group = "g-\(UUID())"
        let producer = try TestBroker.producer()
        let all = Set((0..<2).map { TopicPartition(topic: topic, partition: Int32($0)) })
        let first = EventRecorder(try TestBroker.consumer(group: group, strategy: strategy))
        try first.consumer.subscribe(topics: [topic])
        #expect(await eventually { first.assigned == all })
        try first.consumer.pauseIntake()

        // A second member joins and leaves while the first is paused: its partitions go and come back.
        let second = EventRecorder(try TestBroker.consumer(group: group, strategy: strategy), commits: false)
        try second.consumer.subscribe(topics: [topic])
        #expect(await eventually { !second.assigned.isEmpty })
        await second.stop()
        #expect(await eventually { first.assigned == all && !first.state.withLock { $0.revocations }.isEmpty })

        let witness = try await TestBroker.witness(topic)
        try await TestBroker.send(producer, topic: topic, count: 20, prefix: "p")
        // Still paused: the partitions that came back are not fetched, though a consumer fetching them has all 20.
        #expect(await eventually { witness.messages.count == 20 })
        #expect(first.messages.isEmpty)
        await witness.stop()
        try first.consumer.resumeIntake()
        #expect(await eventually { first.values.count == 20 })

        // And paused again, then resumed with the assignment changing in between: nothing is left behind.
        try first.consumer.pauseIntake()
        let third = EventRecorder(try TestBroker.consumer(group: group, strategy: strategy), commits: false)
        try third.consumer.subscribe(topics: [topic])
        #expect(await eventually { !third.assigned.isEmpty })
        try first.consumer.resumeIntake()
        await third.stop()
        #expect(await eventually { first.assigned == all })
        try await TestBroker.send(producer, topic: topic, count: 20, prefix: "q")
        #expect(await eventually { first.values.filter { $0.hasPrefix("q-") }.count == 20 })
        await first.stop()
        await producer.close()
    }
}
