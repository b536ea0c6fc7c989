import Foundation
import Kafka
import Observability
import Synchronization

// Produces and consumes N messages through the Kafka layer and prints messages/s, measured the way
// librdkafka's rdkafka_performance measures: produce from the first send to the last acknowledgement,
// consume from the first message received to the last. scripts/bench-kafka.sh runs both side by side.
//
//   kafka-bench --bootstrap 127.0.0.1:9092 --topic T --messages 200000 --size 1024 --mode enqueue|send

struct Options {
    var bootstrap = "127.0.0.1:9092"
    var topic = "bench"
    var messages = 200_000
    var size = 1024
    var mode = "enqueue"
    var inFlight = 2_000

    init(_ arguments: [String]) throws {
        var iterator = arguments.makeIterator()
        while let flag = iterator.next() {
            guard let value = iterator.next() else { throw BenchError("missing value for \(flag)") }
            switch flag {
            case "--bootstrap": bootstrap = value
            case "--topic": topic = value
            case "--messages": messages = try Self.positive(flag, value)
            case "--size": size = try Self.positive(flag, value)
            case "--mode": mode = value
            case "--in-flight": inFlight = try Self.positive(flag, value)
            default: throw BenchError("unknown option \(flag)")
            }
        }
        guard ["enqueue", "send"].contains(mode) else { throw BenchError("--mode is enqueue or send") }
    }

    static func positive(_ flag: String, _ value: String) throws -> Int {
        guard let number = Int(value), number > 0 else { throw BenchError("\(flag) takes a positive integer") }
        return number
    }
}

/// A counter that escaping callbacks can share.
final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func increment() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

let logger = Logger(label: "kafka-bench", minimumLevel: .warning)

func produce(_ options: Options) async throws -> Double {
    var configuration = KafkaProducer.Configuration(bootstrapServers: options.bootstrap)
    configuration.linger = .milliseconds(5)
    let producer = try KafkaProducer(configuration: configuration, logger: logger)
    let payload = [UInt8](repeating: 0x61, count: options.size)
    let failures = Counter()
    let started = ContinuousClock.now
    switch options.mode {
    case "enqueue":
        let delivered = Counter()
        for _ in 0..<options.messages {
            let message = OutboundMessage(topic: options.topic, value: payload)
            try await enqueueWaitingForRoom(producer, message) { result in
                if case .failure = result { failures.increment() }
                delivered.increment()
            }
        }
        try await producer.flush(timeout: .seconds(120))
        precondition(delivered.value == options.messages)
    default:
        // Long-lived senders, each awaiting its records one after another, as the worker's job tasks do.
        // (Ten thousand short-lived children would measure the task group's child bookkeeping instead.)
        let senders = min(options.inFlight, options.messages)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for sender in 0..<senders {
                group.addTask {
                    let message = OutboundMessage(topic: options.topic, value: payload)
                    for _ in stride(from: sender, to: options.messages, by: senders) {
                        do { _ = try await producer.send(message) } catch { failures.increment() }
                    }
                }
            }
            try await group.waitForAll()
        }
    }
    let elapsed = ContinuousClock.now - started
    await producer.close()
    guard failures.value == 0 else { throw BenchError("\(failures.value) sends failed") }
    return Double(options.messages) / elapsed.seconds
}

/// Queues one record, waiting while librdkafka's local queue is full, as rdkafka_performance does.
func enqueueWaitingForRoom(
    _ producer: KafkaProducer, _ message: OutboundMessage,
    onDelivery: @escaping @Sendable (Result<DeliveryReport, KafkaError>) -> Void
) async throws {
    while true {
        do throws(KafkaError) {
            try producer.enqueue(message, onDelivery: onDelivery)
            return
        } catch {
            guard error.code == .queueFull else { throw error }
        }
        try await Task.sleep(for: .microseconds(200))
    }
}

func consume(_ options: Options) async throws -> Double {
    var configuration = KafkaConsumer.Configuration(
        bootstrapServers: options.bootstrap, groupID: "kafka-bench-\(UUID())",
        properties: ["session.timeout.ms": "6000", "heartbeat.interval.ms": "1000", "max.poll.interval.ms": "10000"])
    configuration.autoOffsetReset = "earliest"
    let consumer = try KafkaConsumer(configuration: configuration, logger: logger)
    try consumer.subscribe(topics: [options.topic])
    var count = 0
    var bytes = 0
    var first: ContinuousClock.Instant?
    for await event in consumer.events {
        guard case .message(let message) = event else { continue }
        if first == nil { first = .now }
        count += 1
        bytes += message.value.count
        if count == options.messages { break }
    }
    let elapsed = ContinuousClock.now - (first ?? .now)
    await consumer.close()
    guard count == options.messages, bytes == options.messages * options.size else {
        throw BenchError("consumed \(count) messages, \(bytes) bytes")
    }
    return Double(count) / elapsed.seconds
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

do {
    let options = try Options(Array(CommandLine.arguments.dropFirst()))
    let produced = try await produce(options)
    print("swift-\(options.mode) produce: \(Int(produced)) msgs/s")
    let consumed = try await consume(options)
    print("swift-\(options.mode) consume: \(Int(consumed)) msgs/s")
} catch {
    FileHandle.standardError.write(Data("kafka-bench: \(error)\n".utf8))
    exit(1)
}
