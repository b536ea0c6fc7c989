import Foundation
import HTTPClient
import Kafka
import Observability
import Synchronization

// The worker benchmark's driver (scripts/bench-worker.sh runs it around a real receipt-worker process).
//   worker-bench prepare --bootstrap B --sim URL --topic JOBS --jobs N [--padding BYTES]
//     [--proof receipt|signed_transaction|transaction_id] [--bundle-id ID] [--prefix P]
//     [--random-keys | --time-ordered-keys]
//       creates N purchases in the simulator and queues one job for each (each BYTES larger); with --random-keys,
//       job and order ids are random UUIDs and players one of a million, as a game's backend sends them; with
//       --time-ordered-keys, job and order ids are UUIDs of version 7
//   worker-bench drain --bootstrap B --topic RESULTS --jobs N
//       waits for N results; prints jobs/s from the first result to the last
//   worker-bench paced --bootstrap B --sim URL --topic JOBS --results RESULTS --rate R --seconds S
//       submits R jobs/s for S seconds and prints p50/p99 of submit-to-result latency
//   worker-bench hop --bootstrap B --topic T --rate R --seconds S
//       the broker alone, with the worker's client settings: R records/s for S seconds; prints p50/p99 of
//       send -> acknowledged and send -> received (the floor under every Kafka hop of a job)

func option(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func required(_ name: String) -> String {
    guard let value = option(name) else {
        FileHandle.standardError.write(Data("worker-bench: \(name) is required\n".utf8))
        exit(2)
    }
    return value
}

let logger = Logger(label: "worker-bench", minimumLevel: .error)
let bootstrap = required("--bootstrap")

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// What each job proves its purchase with (`--proof`, default receipt), and for which app (`--bundle-id`,
/// default the simulator's default app, named by no `bundle_id` in the job).
let proofField = option("--proof") ?? "receipt"
let bundleID = option("--bundle-id")
/// Job ids are `PREFIX` + index (`--prefix`, default b): two prepares into one topic need two prefixes.
let prefix = option("--prefix") ?? "b"
/// `--random-keys`: ids as a game's backend makes them, so the ledger's indexes on them are written at random places;
/// with `--time-ordered-keys` job and order ids are UUIDs of version 7 (RFC 9562: the time first), players still
/// one of a million.
let timeOrderedKeys = CommandLine.arguments.contains("--time-ordered-keys")
let randomKeys = timeOrderedKeys || CommandLine.arguments.contains("--random-keys")

/// Creates purchases in the simulator, 64 at a time; returns their proofs (`--proof`) in the order they were made,
/// as a game's jobs follow its players' purchases: Apple's transaction ids increase with time, so the jobs in flight
/// at once carry neighbouring ids, and the ledger's indexes on them are written at their newest pages. (Taken slice by
/// slice, the jobs in flight would carry ids from the whole burst's range, written all over those indexes.)
func purchases(_ count: Int, sim: String) async throws -> [String] {
    let body = Data(
        (bundleID.map { #"{"product_id":"coins.1000","bundle_id":"\#($0)"}"# } ?? #"{"product_id":"coins.1000"}"#).utf8)
    let http = HTTPClient(logger: logger)
    defer { http.shutdown() }
    return try await withThrowingTaskGroup(of: [(index: Int, proof: String)].self) { group in
        let slices = 64
        for slice in 0..<slices {
            group.addTask {
                var proofs: [(index: Int, proof: String)] = []
                for index in stride(from: slice, to: count, by: slices) {
                    let response = try await http.execute(
                        HTTPRequest(
                            method: .post, url: "\(sim)/admin/purchases", body: body))
                    let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
                    proofs.append((index, object?[proofField] as? String ?? ""))
                }
                return proofs
            }
        }
        var ordered = [String](repeating: "", count: max(0, count))
        for try await proofs in group {
            for (index, proof) in proofs { ordered[index] = proof }
        }
        return ordered
    }
}

/// `--padding N` adds an N-byte field to every job (receipts of that size, for memory measurements).
let padding = option("--padding").flatMap(Int.init).map { String(repeating: "p", count: $0) }

func jobValue(id: String, order: String, player: String, receipt: String) -> [UInt8] {
    var extra = padding.map { #","padding":"\#($0)""# } ?? ""
    if let bundleID { extra += #","bundle_id":"\#(bundleID)""# }
    return Array(
        #"{"job_id":"\#(id)","order_id":"\#(order)","user_id":"\#(player)","product_id":"coins.1000","\#(proofField)":"\#(receipt)"\#(extra)}"#
            .utf8)
}

/// A job's id, order and player.
func keys(_ index: Int) -> (job: String, order: String, player: String) {
    guard randomKeys else { return ("\(prefix)\(index)", "order-\(prefix)\(index)", "player") }
    let player = "player-\(Int.random(in: 0..<1_000_000))"
    guard timeOrderedKeys else { return (UUID().uuidString.lowercased(), UUID().uuidString.lowercased(), player) }
    return (uuidVersion7(), uuidVersion7(), player)
}

/// A UUID of version 7 (RFC 9562, section 5.7): 48 bits of Unix milliseconds, then random bits; its text sorts
/// by the time it was made.
func uuidVersion7() -> String {
    let milliseconds = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
    var bytes = withUnsafeBytes(of: UUID().uuid) { Array($0) }
    for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> (40 - 8 * UInt64(index))) }
    bytes[6] = 0x70 | (bytes[6] & 0x0F)
    bytes[8] = 0x80 | (bytes[8] & 0x3F)
    let uuid = bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }
    return UUID(uuid: uuid).uuidString.lowercased()
}

func resultsConsumer(topic: String) throws -> KafkaConsumer {
    let consumer = try KafkaConsumer(
        configuration: .init(
            bootstrapServers: bootstrap, groupID: "bench-reader-\(UUID())",
            properties: [
                "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "max.poll.interval.ms": "10000",
                "fetch.wait.max.ms": "10",  // the reader is part of the measured chain: no 500 ms fetch wait
            ]),
        logger: logger)
    try consumer.subscribe(topics: [topic])
    return consumer
}

/// The job id of a result event, read without a full JSON decode.
func jobID(of value: [UInt8]) -> String? {
    guard let text = String(validating: value, as: UTF8.self), let range = text.range(of: #""job_id":""#) else {
        return nil
    }
    let rest = text[range.upperBound...]
    return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
}

switch CommandLine.arguments.dropFirst().first {
case "prepare":
    let count = Int(required("--jobs")) ?? 0
    let receipts = try await purchases(count, sim: required("--sim"))
    let producer = try KafkaProducer(configuration: .init(bootstrapServers: bootstrap), logger: logger)
    let topic = required("--topic")
    for (index, receipt) in receipts.enumerated() {
        let job = keys(index)
        while true {
            do {
                try producer.enqueue(
                    OutboundMessage(
                        topic: topic, key: Array(job.order.utf8),
                        value: jobValue(id: job.job, order: job.order, player: job.player, receipt: receipt))
                ) { _ in }
                break
            } catch { try await Task.sleep(for: .milliseconds(1)) }
        }
    }
    try await producer.flush(timeout: .seconds(60))
    await producer.close()
    print("prepared \(count) jobs")

case "drain":
    let count = Int(required("--jobs")) ?? 0
    let consumer = try resultsConsumer(topic: required("--topic"))
    var seen = Set<String>()
    var first: ContinuousClock.Instant?
    for await event in consumer.events {
        guard case .message(let message) = event, let id = jobID(of: message.value) else { continue }
        if first == nil { first = .now }
        seen.insert(id)
        if seen.count >= count { break }
    }
    let elapsed = ContinuousClock.now - (first ?? .now)
    await consumer.close()
    print(
        "\(Int(Double(count) / max(seconds(elapsed), 0.001))) jobs/s (\(count) jobs in \(String(format: "%.1f", seconds(elapsed))) s)"
    )

case "paced":
    let rate = Double(required("--rate")) ?? 100
    let duration = Double(required("--seconds")) ?? 10
    let total = Int(rate * duration)
    let receipts = try await purchases(total, sim: required("--sim"))
    let consumer = try resultsConsumer(topic: required("--results"))
    let submitted = Mutex<[String: ContinuousClock.Instant]>([:])
    let latencies = Mutex<[Double]>([])
    let reader = Task {
        for await event in consumer.events {
            guard case .message(let message) = event, let id = jobID(of: message.value) else { continue }
            let now = ContinuousClock.now
            if let start = submitted.withLock({ $0.removeValue(forKey: id) }) {
                latencies.withLock { $0.append(seconds(now - start) * 1000) }
            }
            if latencies.withLock({ $0.count }) >= total { break }
        }
    }
    try await Task.sleep(for: .seconds(4))  // let the reader join its group before timing starts
    var paced = KafkaProducer.Configuration(bootstrapServers: bootstrap)
    paced.linger = .milliseconds(1)
    let producer = try KafkaProducer(configuration: paced, logger: logger)
    let start = ContinuousClock.now
    for (index, receipt) in receipts.enumerated() {
        let due = start + .microseconds(Int64(Double(index) / rate * 1_000_000))
        if due > .now { try await Task.sleep(until: due, clock: .continuous) }
        let id = "p\(index)-\(UUID().uuidString.prefix(6))"
        submitted.withLock { $0[id] = .now }
        try producer.enqueue(
            OutboundMessage(
                topic: required("--topic"), key: Array(id.utf8),
                value: jobValue(id: id, order: "order-\(id)", player: "player", receipt: receipt))
        ) { _ in }
    }
    let deadline = ContinuousClock.now + .seconds(60)
    while latencies.withLock({ $0.count }) < total && ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(50))
    }
    reader.cancel()
    await producer.close()
    await consumer.close()
    let sorted = latencies.withLock { $0 }.sorted()
    guard !sorted.isEmpty else { print("no results"); exit(1) }
    func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
    print(
        String(
            format: "p50 %.1f ms, p99 %.1f ms at %.0f jobs/s (%d of %d answered)", percentile(0.5), percentile(0.99),
            rate, sorted.count, total))

case "hop":
    try await hop(
        rate: Double(required("--rate")) ?? 100, seconds: Double(required("--seconds")) ?? 10,
        topic: required("--topic"))

default:
    FileHandle.standardError.write(Data("usage: worker-bench prepare|drain|paced ...\n".utf8))
    exit(2)
}

/// Latencies in milliseconds, shared by tasks.
final class Samples: Sendable {
    private let values = Mutex<[Double]>([])
    func add(_ value: Double) { values.withLock { $0.append(value) } }
    var count: Int { values.withLock { $0.count } }
    var summary: String {
        let sorted = values.withLock { $0 }.sorted()
        guard !sorted.isEmpty else { return "none" }
        func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
        return String(format: "p50 %.1f ms, p99 %.1f ms", percentile(0.5), percentile(0.99))
    }
}

final class SendTimes: Sendable {
    private let times = Mutex<[String: ContinuousClock.Instant]>([:])
    subscript(id: String) -> ContinuousClock.Instant? {
        get { times.withLock { $0[id] } }
        set { times.withLock { $0[id] = newValue } }
    }
}

/// The broker alone with the worker's producer settings: one awaited send per record at `rate`.
func hop(rate: Double, seconds duration: Double, topic: String) async throws {
    let total = Int(rate * duration)
    let consumer = try resultsConsumer(topic: topic)
    let sent = SendTimes()
    let received = Samples()
    let acknowledged = Samples()
    let reader = Task {
        for await event in consumer.events {
            guard case .message(let message) = event, let id = jobID(of: message.value) else { continue }
            let now = ContinuousClock.now
            if let start = sent[id] { received.add(seconds(now - start) * 1000) }
            if received.count >= total { break }
        }
    }
    try await Task.sleep(for: .seconds(4))  // let the reader join its group before timing starts
    // As the worker publishes: idempotent, acks=all, linger.ms=5, one awaited send per record.
    let producer = try KafkaProducer(
        configuration: .init(bootstrapServers: bootstrap, properties: ["linger.ms": "5"]), logger: logger)
    let start = ContinuousClock.now
    try await withThrowingDiscardingTaskGroup { group in
        for index in 0..<total {
            let due = start + .microseconds(Int64(Double(index) / rate * 1_000_000))
            if due > .now { try await Task.sleep(until: due, clock: .continuous) }
            let id = "h\(index)"
            let at = ContinuousClock.now
            sent[id] = at
            group.addTask {
                _ = try await producer.send(
                    OutboundMessage(topic: topic, key: Array(id.utf8), value: Array(#"{"job_id":"\#(id)"}"#.utf8)))
                acknowledged.add(seconds(ContinuousClock.now - at) * 1000)
            }
        }
    }
    let deadline = ContinuousClock.now + .seconds(30)
    while received.count < total && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
    reader.cancel()
    await producer.close()
    await consumer.close()
    print(
        "at \(Int(rate)) records/s: send -> acknowledged \(acknowledged.summary); send -> received \(received.summary)")
}
