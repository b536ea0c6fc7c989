import AppStoreSimulator
import Foundation
import HTTPClient
import Kafka
import Observability
import Synchronization

// The notification benchmark's driver (scripts/bench-notifications.sh runs it around a real receipt-worker):
//   notification-bench --bootstrap B --jobs JOBS --results RESULTS --receiver URL --count N [--concurrency C]
//       [--paced-seconds S]
// 1. grants N purchases (signed transactions made here with the simulator's test chain, as jobs);
// 2. posts N signed REFUND notifications to the receiver, C at a time: notifications answered 200 per second;
// 3. waits for the N receipt.revoked events: processing rate, from the first post to the last event;
// 4. posts at half the rate of 2 for S seconds: p50/p99 of the receiver's answer.

func option(_ name: String, default value: String? = nil) -> String {
    let arguments = CommandLine.arguments
    if let index = arguments.firstIndex(of: name), index + 1 < arguments.count { return arguments[index + 1] }
    guard let value else {
        FileHandle.standardError.write(Data("notification-bench: \(name) is required\n".utf8))
        exit(2)
    }
    return value
}

let logger = Logger(label: "notification-bench", minimumLevel: .error)
/// A line on standard output at once (`print` is buffered into a file): scripts/bench-notifications.sh
/// watches for the phases.
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
let bootstrap = option("--bootstrap")
let count = Int(option("--count", default: "10000")) ?? 10_000
let concurrency = Int(option("--concurrency", default: "64")) ?? 64
let pacedSeconds = Double(option("--paced-seconds", default: "10")) ?? 10
let receiver = option("--receiver")
let run = UUID().uuidString.prefix(6).lowercased()
let base = 3_000_000_000_000 + Int.random(in: 0..<1_000_000) * 100_000

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func milliseconds(_ date: Date) -> Int { Int((date.timeIntervalSince1970 * 1000).rounded()) }

func json(_ object: [String: Any]) -> Data { (try? JSONSerialization.data(withJSONObject: object)) ?? Data() }

func transaction(_ index: Int, refunded: Bool) throws -> String {
    var fields: [String: Any] = [
        "transactionId": String(base + index), "originalTransactionId": String(base + index),
        "bundleId": "com.example", "productId": "gems_100", "quantity": 1, "type": "Consumable",
        "environment": "Production", "purchaseDate": milliseconds(Date()) - 60_000,
        "signedDate": milliseconds(Date()), "inAppOwnershipType": "PURCHASED",
    ]
    if refunded {
        fields["revocationDate"] = milliseconds(Date())
        fields["revocationReason"] = 0
        fields["revocationType"] = "REFUND_FULL"
        fields["revocationPercentage"] = 100_000
    }
    return try AppStoreSimulator.testSigned(json(fields))
}

func refundNotification(_ index: Int) throws -> Data {
    let payload: [String: Any] = [
        "notificationType": "REFUND", "notificationUUID": UUID().uuidString.lowercased(), "version": "2.0",
        "signedDate": milliseconds(Date()),
        "data": [
            "appAppleId": AppStoreSimulator.Configuration().appAppleID, "bundleId": "com.example",
            "environment": "Production", "signedTransactionInfo": try transaction(index, refunded: true),
        ] as [String: Any],
    ]
    return json(["signedPayload": try AppStoreSimulator.testSigned(json(payload))])
}

func consumer(_ topic: String) throws -> KafkaConsumer {
    let consumer = try KafkaConsumer(
        configuration: .init(
            bootstrapServers: bootstrap, groupID: "notification-bench-\(UUID())",
            properties: [
                "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "max.poll.interval.ms": "10000",
                "fetch.wait.max.ms": "10",
            ]),
        logger: logger)
    try consumer.subscribe(topics: [topic])
    return consumer
}

/// Counts result events whose value contains `marker` until `target`; the instant the last arrived.
func waitForEvents(_ target: Int, containing marker: String, on topic: String) async throws -> ContinuousClock.Instant {
    let reader = try consumer(topic)
    let needle = Array(marker.utf8)
    var seen = 0
    for await event in reader.events {
        guard case .message(let message) = event else { continue }
        if message.value.count >= needle.count,
            String(decoding: message.value, as: UTF8.self).contains(marker)
        {
            seen += 1
            if seen >= target { break }
        }
    }
    await reader.close()
    return .now
}

// 1. Grants.
let producer = try KafkaProducer(configuration: .init(bootstrapServers: bootstrap), logger: logger)
let granted = Task {
    try await waitForEvents(count, containing: "\"order_id\":\"bench-\(run)-", on: option("--results"))
}
for index in 0..<count {
    let job = json([
        "job_id": "bench-\(run)-\(index)", "order_id": "bench-\(run)-\(index)", "user_id": "player",
        "product_id": "gems_100", "signed_transaction": try transaction(index, refunded: false),
    ])
    while true {
        do {
            try producer.enqueue(
                OutboundMessage(
                    topic: option("--jobs"), key: Array("bench-\(run)-\(index)".utf8), value: Array(job))
            ) { _ in }
            break
        } catch { try await Task.sleep(for: .milliseconds(1)) }
    }
}
try await producer.flush(timeout: .seconds(60))
_ = try await granted.value
say("granted \(count) purchases")

// 2. Notifications at full speed.
let bodies = try (0..<count).map(refundNotification)
let http = HTTPClient(logger: logger)
let statuses = Mutex<[Int: Int]>([:])
let processed = Task {
    try await waitForEvents(count, containing: "\"type\":\"receipt.revoked\"", on: option("--results"))
}
say("posting \(count) notifications")
let started = ContinuousClock.now
let nextIndex = Atomic<Int>(0)
try await withThrowingTaskGroup(of: Void.self) { group in
    for _ in 0..<concurrency {
        group.addTask {
            while true {
                let index = nextIndex.add(1, ordering: .relaxed).oldValue
                guard index < bodies.count else { return }
                let response = try await http.execute(
                    HTTPRequest(method: .post, url: receiver, body: bodies[index], timeout: .seconds(30)))
                statuses.withLock { $0[response.status, default: 0] += 1 }
            }
        }
    }
    try await group.waitForAll()
}
let received = ContinuousClock.now - started
let rate = Double(count) / max(seconds(received), 0.001)
let answered = statuses.withLock { $0 }.sorted { $0.key < $1.key }.map { "\($0.value) x \($0.key)" }
say(
    "receiver: \(Int(rate)) notifications/s verified, produced and acknowledged (\(count) in "
        + String(format: "%.1f", seconds(received)) + " s, \(concurrency) at a time; answers: "
        + answered.joined(separator: ", ") + ")")
let lastEvent = try await processed.value
say(
    "processing: \(Int(Double(count) / max(seconds(lastEvent - started), 0.001))) notifications/s to receipt.revoked "
        + "events (first post to last event: " + String(format: "%.1f", seconds(lastEvent - started)) + " s)")

// 4. Latency at half the rate.
let pacedRate = max(1, rate / 2)
let pacedCount = Int(pacedRate * pacedSeconds)
let pacedBodies = try (0..<pacedCount).map { try refundNotification($0 % count) }
let latencies = Mutex<[Double]>([])
let pacedStart = ContinuousClock.now
try await withThrowingTaskGroup(of: Void.self) { group in
    for (index, body) in pacedBodies.enumerated() {
        let due = pacedStart + .seconds(Double(index) / pacedRate)
        if due > .now { try await Task.sleep(until: due) }
        group.addTask {
            let sent = ContinuousClock.now
            let response = try await http.execute(
                HTTPRequest(method: .post, url: receiver, body: body, timeout: .seconds(30)))
            let elapsed = seconds(ContinuousClock.now - sent) * 1000
            if response.status == 200 { latencies.withLock { $0.append(elapsed) } }
        }
    }
    try await group.waitForAll()
}
let sorted = latencies.withLock { $0 }.sorted()
func percentile(_ p: Double) -> Double {
    sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}
say(
    "receiver at \(Int(pacedRate))/s for \(Int(pacedSeconds)) s: p50 " + String(format: "%.1f", percentile(0.5))
        + " ms, p99 " + String(format: "%.1f", percentile(0.99)) + " ms (\(sorted.count) answered 200 of \(pacedCount))"
)
http.shutdown()
await producer.close()
