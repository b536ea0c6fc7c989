import Foundation
import HTTPClient
import Kafka
import Observability

// The chaos run's driver (scripts/chaos.sh runs it around three real receipt-worker processes).
//   chaos-driver prepare --sim URL --jobs N --plan FILE --run NAME
//       buys purchases in the simulator and writes groups of jobs (genuine, replayed, restored, redelivered,
//       sandbox, product swaps) with the answer each must get
//   chaos-driver submit --bootstrap B --topic JOBS --plan FILE --rate R
//       submits every job of the plan, shuffled, R jobs/s
//   chaos-driver check --bootstrap B --results T --dlq T --plan FILE --timeout S
//       reads results and dead letters until every job is answered or S seconds pass; prints the figures;
//       exits 1 when one that must be zero is not

let logger = Logger(label: "chaos-driver", minimumLevel: .error)

func option(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func required(_ name: String) -> String {
    guard let value = option(name) else {
        FileHandle.standardError.write(Data("chaos-driver: \(name) is required\n".utf8))
        exit(2)
    }
    return value
}

/// The mix of a chaos run, in groups (a replay, restore or redelivery group holds two jobs).
let mix: [(ChaosGroup.Kind, Int)] = [
    (.receipt, 25), (.signed, 20), (.transactionID, 10), (.replay, 10), (.restore, 10), (.sandbox, 5), (.swap, 5),
    (.redelivery, 15),
]

func prepare() async throws {
    let wanted = Int(required("--jobs")) ?? 0
    let http = HTTPClient(logger: logger)
    defer { http.shutdown() }
    let planner = ChaosPlanner(simulator: required("--sim"), http: http, run: required("--run"))
    let cycle = mix.flatMap { kind, weight in Array(repeating: kind, count: weight) }
    // Average jobs per group in the mix, to know how many groups make the wanted jobs.
    let perGroup =
        Double(cycle.map { [.replay, .restore, .redelivery].contains($0) ? 2 : 1 }.reduce(0, +))
        / Double(cycle.count)
    // A few groups more than the average asks for, so the plan holds at least the wanted jobs.
    let count = Int((Double(wanted) / perGroup).rounded(.up)) + 8
    let groups = try await withThrowingTaskGroup(of: [ChaosGroup].self) { tasks in
        let slices = 32
        for slice in 0..<slices {
            tasks.addTask {
                var made: [ChaosGroup] = []
                for index in stride(from: slice, to: count, by: slices) {
                    made.append(try await planner.group(cycle[index % cycle.count], index: index))
                }
                return made
            }
        }
        return try await tasks.reduce(into: [ChaosGroup]()) { $0 += $1 }
    }
    try JSONEncoder().encode(groups).write(to: URL(fileURLWithPath: required("--plan")))
    print("prepared \(groups.reduce(0) { $0 + $1.jobs.count }) jobs in \(groups.count) groups")
}

func loadPlan() throws -> [ChaosGroup] {
    try JSONDecoder().decode([ChaosGroup].self, from: Data(contentsOf: URL(fileURLWithPath: required("--plan"))))
}

func submit() async throws {
    let jobs = try loadPlan().flatMap(\.jobs).shuffled()
    let rate = Double(required("--rate")) ?? 500
    let topic = required("--topic")
    var configuration = KafkaProducer.Configuration(bootstrapServers: required("--bootstrap"))
    configuration.deliveryTimeout = .seconds(120)
    let producer = try KafkaProducer(configuration: configuration, logger: logger)
    let start = ContinuousClock.now
    for (index, job) in jobs.enumerated() {
        let due = start + .microseconds(Int64(Double(index) / rate * 1_000_000))
        if due > .now { try await Task.sleep(until: due, clock: .continuous) }
        let message = OutboundMessage(
            topic: topic, key: Array(job.orderID.utf8), value: Array(job.value.utf8))
        while true {
            do {
                try producer.enqueue(message) { _ in }
                break
            } catch { try await Task.sleep(for: .milliseconds(5)) }
        }
    }
    try await producer.flush(timeout: .seconds(120))
    await producer.close()
    print("submitted \(jobs.count) jobs")
}

/// What the checker has read so far, shared between the reading task and the waiting loop.
final class Answers: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSLock()
    private var results: [String: [[String: Any]]] = [:]
    private var deadLettered: [String: String] = [:]
    private var answered = Set<String>()

    func add(_ message: InboundMessage, expected: Set<String>) {
        let object = (try? JSONSerialization.jsonObject(with: Data(message.value))) as? [String: Any]
        guard let object, let id = object["job_id"] as? String, expected.contains(id) else { return }
        lock.withLock {
            if let reason = message.header("dlq_reason")?.stringValue {
                deadLettered[id] = reason
            } else {
                results[id, default: []].append(object)
            }
            answered.insert(id)
        }
    }

    var answeredCount: Int { lock.withLock { answered.count } }
    var snapshot: ([String: [[String: Any]]], [String: String]) { lock.withLock { (results, deadLettered) } }
}

func check() async throws {
    let groups = try loadPlan()
    let expected = Set(groups.flatMap(\.jobs).map(\.jobID))
    let timeout = Double(required("--timeout")) ?? 300
    // One consumer per topic: an assignment replaces the previous one.
    let answers = Answers()
    var readers: [(KafkaConsumer, Task<Void, Never>)] = []
    for topic in [required("--results"), required("--dlq")] {
        let consumer = try KafkaConsumer(
            configuration: .init(bootstrapServers: required("--bootstrap"), groupID: "chaos-check-\(UUID())"),
            logger: logger)
        try await consumer.assign(topic: topic, from: .beginning)
        let reading = Task {
            for await event in consumer.events {
                if case .message(let message) = event { answers.add(message, expected: expected) }
            }
        }
        readers.append((consumer, reading))
    }
    let deadline = ContinuousClock.now + .seconds(timeout)
    while answers.answeredCount < expected.count && ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(200))
    }
    // Answers still in flight for a moment (a redelivered job's second event) are read too.
    try await Task.sleep(for: .seconds(2))
    for (consumer, reading) in readers {
        await consumer.close()
        await reading.value
    }
    let (results, deadLettered) = answers.snapshot
    let verdict = ChaosVerdict(groups: groups, results: results, deadLettered: deadLettered)
    print(verdict.report)
    exit(verdict.failed ? 1 : 0)
}

switch CommandLine.arguments.dropFirst().first {
case "prepare": try await prepare()
case "submit": try await submit()
case "check": try await check()
default:
    FileHandle.standardError.write(Data("usage: chaos-driver prepare|submit|check ...\n".utf8))
    exit(2)
}
