import Foundation
import Kafka
import TestSupport
import Testing

@Suite("Kafka round trips against a real broker", .timeLimit(.minutes(2)))
struct KafkaRoundTripTests {
    @Test("a record comes back with its key, value and headers, where the delivery report said")
    func roundTripWithKeysAndHeaders() async throws {
        let topic = try await TestBroker.makeTopic(partitions: 3)
        let producer = try TestBroker.producer()
        let headers = [
            MessageHeader(name: "ce_type", string: "receipt.granted"),
            MessageHeader(name: "ce_id", string: "evt-1"),
            MessageHeader(name: "empty", value: nil),
            MessageHeader(name: "ce_type", string: "repeated names are kept"),
            // Text given as text, bytes as bytes: an empty text is an empty value, not a header without one.
            MessageHeader(name: "blank", string: ""),
            MessageHeader(name: "raw", value: [0xFF, 0x00, 0x7F]),
            MessageHeader(name: "long", string: String(repeating: "é", count: 300)),
        ]
        let sent = OutboundMessage(
            topic: topic, key: Array("order-42".utf8), value: Array("{\"a\":1}".utf8), headers: headers)
        let report = try await producer.send(sent)
        #expect(report.topic == topic)
        #expect(report.offset >= 0)

        let recorder = EventRecorder(try TestBroker.consumer(group: "g-\(UUID())"))
        try recorder.consumer.subscribe(topics: [topic])
        #expect(await eventually { !recorder.messages.isEmpty })
        await recorder.stop()

        let received = try #require(recorder.messages.first)
        #expect(received.key == sent.key)
        #expect(received.value == sent.value)
        #expect(received.headers == headers)
        #expect(received.header("ce_id")?.stringValue == "evt-1")
        #expect(received.header("blank")?.value == [])
        #expect(received.header("empty")?.value == nil)
        #expect(received.header("long")?.stringValue == String(repeating: "é", count: 300))
        #expect(received.partition == report.partition)
        #expect(received.offset == report.offset)
        #expect(received.timestamp != nil)
        await producer.close()
    }

    @Test("a consumer restarted in the same group resumes right after the committed offset")
    func commitRestartResume() async throws {
        let topic = try await TestBroker.makeTopic(partitions: 1)
        let group = "g-\(UUID())"
        let producer = try TestBroker.producer()
        for index in 0..<20 {
            _ = try await producer.send(OutboundMessage(topic: topic, value: Array("m\(index)".utf8)))
        }
        let partition = TopicPartition(topic: topic, partition: 0)

        let first = try TestBroker.consumer(group: group)
        try first.subscribe(topics: [topic])
        var seen = 0
        for await event in first.events {
            guard case .message(let message) = event else { continue }
            seen += 1
            if seen == 10 {
                try await first.commit([message.topicPartition: message.offset + 1])
                break
            }
        }
        #expect(try await first.committed([partition]) == [partition: 10])
        await first.close()

        let second = EventRecorder(try TestBroker.consumer(group: group), commits: false)
        try second.consumer.subscribe(topics: [topic])
        #expect(await eventually { second.messages.count >= 10 })
        await second.stop()
        #expect(second.messages.first?.offset == 10)
        #expect(second.messages.map(\.offset) == Array(10..<20))
        await producer.close()
    }

    @Test("a paused partition delivers nothing until it is resumed")
    func pauseAndResume() async throws {
        let topic = try await TestBroker.makeTopic(partitions: 1)
        let producer = try TestBroker.producer()
        let recorder = EventRecorder(try TestBroker.consumer(group: "g-\(UUID())"))
        try recorder.consumer.subscribe(topics: [topic])
        try await TestBroker.send(producer, topic: topic, count: 5, prefix: "before")
        #expect(await eventually { recorder.messages.count == 5 })

        #expect(try recorder.consumer.pauseIntake())
        #expect(try recorder.consumer.pauseIntake() == false)
        let witness = try await TestBroker.witness(topic)
        try await TestBroker.send(producer, topic: topic, count: 5, prefix: "paused")
        // Nothing arrives, though a consumer fetching the partition has all ten: fetched, had it not been paused.
        #expect(await eventually { witness.messages.count == 10 })
        #expect(recorder.messages.count == 5)
        await witness.stop()

        #expect(try recorder.consumer.resumeIntake())
        #expect(await eventually { recorder.messages.count == 10 })
        await recorder.stop()
        #expect(recorder.values.contains("paused-4"))
        await producer.close()
    }
}
