import AppStoreSimulator
import CSQLite
import Foundation
import HTTPClient
import Kafka
import Observability
import ReceiptWorker
import Synchronization
import TestSupport
import Testing
import Flows

/// One worker with its own topics, a simulator, a SQLite ledger, and a reader of results and dead letters.
final class WorkerHarness: Sendable {
    let simulator: AppStoreSimulator
    private let current: CurrentWorker
    /// The worker running now (``restartWorker()`` replaces it).
    var worker: Worker { current.value.withLock { $0 } }
    let configuration: WorkerConfiguration
    private let workerLogger: Logger
    let producer: KafkaProducer
    let reader: KafkaConsumer
    let topics: WorkerConfiguration.Topics
    /// The worker's consumer group, for tests that add a member to it.
    let groupID: String
    let http: HTTPClient
    private let received = Mutex<[InboundMessage]>([])
    /// The results topic's messages by `job_id` and by `order_id`, read once as they arrive: tests poll for
    /// them every few milliseconds, and decoding every result at every poll cost dozens of tests their CPU.
    private let resultsByJob = Mutex<[String: [InboundMessage]]>([:])
    private let resultsByOrder = Mutex<[String: [InboundMessage]]>([:])
    /// The App Store Server Notifications receiver, when the harness was made with `notifications: true`; the
    /// simulator sends its notifications there.
    let receiver: NotificationReceiver?
    private let tasks = Mutex<[Task<Void, Never>]>([])
    static let logger = Logger(
        label: "e2e", minimumLevel: ProcessInfo.processInfo.environment["E2E_DEBUG"] != nil ? .debug : .error)

    static var bootstrap: String {
        guard let value = ProcessInfo.processInfo.environment["KAFKA_BOOTSTRAP"] else {
            Issue.record("KAFKA_BOOTSTRAP is not set: run the tests with scripts/test.sh")
            return "127.0.0.1:1"
        }
        return value
    }

    init(
        allowSandbox: Bool = false, maxAttempts: Int = 6, workerLog: LogSink? = nil, notifications: Bool = false,
        createNotificationTopics: Bool = true, parking: Bool = false,
        configure: (inout WorkerConfiguration) -> Void = { _ in }
    )
        async throws
    {
        simulator = try AppStoreSimulator()
        simulator.start()
        http = HTTPClient(logger: Self.logger)
        let suffix = UUID().uuidString.prefix(8).lowercased()
        var configuration = WorkerConfiguration()
        configuration.topics.jobs = "jobs-\(suffix)"
        configuration.topics.results = "results-\(suffix)"
        configuration.topics.dlq = "dlq-\(suffix)"
        configuration.topics.notifications = "notifications-\(suffix)"
        configuration.topics.consumption = "consumption-\(suffix)"
        // Each test its own: a broker shared by runs may hold the default topics.
        configuration.topics.retries = "retries-\(suffix)"
        topics = configuration.topics
        groupID = "worker-\(suffix)"
        var created = [
            (configuration.topics.jobs, 2), (configuration.topics.results, 1), (configuration.topics.dlq, 1),
        ]
        if notifications && createNotificationTopics {
            created += [(configuration.topics.notifications, 2), (configuration.topics.consumption, 1)]
        }
        if parking { created.append((configuration.topics.retries, 2)) }
        try await KafkaAdmin.createTopics(bootstrapServers: Self.bootstrap, topics: created, logger: Self.logger)
        configuration.defaultApp.bundleID = "com.example"
        configuration.defaultApp.allowSandbox = allowSandbox
        configuration.apple.verifyReceiptProductionURL = "\(simulator.baseURL)/production/verifyReceipt"
        configuration.apple.verifyReceiptSandboxURL = "\(simulator.baseURL)/sandbox/verifyReceipt"
        configuration.apple.rootCertificates = [Data(AppStoreSimulator.testRootPEM.utf8)]
        configuration.apple.receiptRootCertificates = [Data(AppStoreSimulator.testRootPEM.utf8)]
        configuration.ledgerURL =
            "sqlite:" + FileManager.default.temporaryDirectory.appendingPathComponent("e2e-\(suffix).sqlite").path
        configuration.retry.maxAttempts = maxAttempts
        configuration.retry.initialBackoff = .milliseconds(20)
        configuration.retry.maxBackoff = .milliseconds(200)
        configuration.drainTimeout = .seconds(5)
        configuration.kafka = [
            "bootstrap.servers": Self.bootstrap, "group.id": groupID, "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "500", "max.poll.interval.ms": "10000", "auto.offset.reset": "earliest",

        ]
        if notifications {
            configuration.defaultApp.appAppleID = AppStoreSimulator.Configuration().appAppleID
            configuration.defaultApp.apiKeyID = "keyId"
            configuration.defaultApp.apiIssuerID = "issuerId"
            configuration.defaultApp.apiPrivateKeyPEM = try String(
                contentsOf: MetricsEndpointTests.repositoryRoot.appendingPathComponent(
                    "Tests/AppleClientTests/testSigningKey.p8"), encoding: .utf8)
            configuration.apple.apiProductionURL = "\(simulator.baseURL)/production"
            configuration.apple.apiSandboxURL = "\(simulator.baseURL)/sandbox"
        }
        // The sweep of Apple's history and the subscription status checks ask the simulator too: on only in the
        // tests of them.
        configuration.sweepInterval = nil
        configuration.statusCheckInterval = nil
        configure(&configuration)
        workerLogger = workerLog.map { Logger(label: "e2e", minimumLevel: .info, sink: $0) } ?? Self.logger
        self.configuration = configuration
        let worker = try await WorkerAssembly.make(configuration, logger: workerLogger)
        current = CurrentWorker(worker)
        producer = try KafkaProducer(configuration: .init(bootstrapServers: Self.bootstrap), logger: Self.logger)
        reader = try KafkaConsumer(
            configuration: .init(
                bootstrapServers: Self.bootstrap, groupID: "reader-\(suffix)",
                properties: [
                    "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "max.poll.interval.ms": "10000",
                ]),
            logger: Self.logger)
        // Assigned, not subscribed: no group to join (seconds each, with dozens of harnesses at once), and
        // every record from the first, whenever the reader starts.
        try await reader.assign(
            topics: [configuration.topics.results, configuration.topics.dlq]
                + (notifications && createNotificationTopics ? [configuration.topics.notifications] : []),
            from: .beginning)
        if notifications {
            let current = self.current
            let receiver = try NotificationReceiver(
                listen: ListenAddress(host: "127.0.0.1", port: 0), produceDeadline: .seconds(3),
                intake: { current.value.withLock { $0 }.notificationIntake })
            receiver.start()
            self.receiver = receiver
            try await SimulatorAdmin(baseURL: simulator.baseURL, http: http).sendNotifications(
                to: "http://127.0.0.1:\(receiver.port)/notifications/apple")
        } else {
            receiver = nil
        }
        let reader = self.reader
        let running = Task { do { try await worker.run() } catch { Issue.record("worker failed: \(error)") } }
        let reading = Task { [self] in
            for await event in reader.events {
                if case .message(let message) = event {
                    self.received.withLock { $0.append(message) }
                    if message.topic == self.topics.results,
                        let object = (try? JSONSerialization.jsonObject(with: Data(message.value))) as? [String: Any]
                    {
                        if let job = object["job_id"] as? String {
                            self.resultsByJob.withLock { $0[job, default: []].append(message) }
                        }
                        if let order = object["order_id"] as? String {
                            self.resultsByOrder.withLock { $0[order, default: []].append(message) }
                        }
                    }
                    let channel =
                        switch message.topic {
                        case self.topics.results: "results"
                        case self.topics.notifications: "notifications"
                        default: "dlq"
                        }
                    ContractCapture.record(
                        channel: channel, key: message.key,
                        headers: message.headers.map { ($0.name, $0.value) }, value: message.value)
                }
                if case .partitionsRevoked(let revocation) = event { revocation.done() }
            }
        }
        tasks.withLock { $0 = [running, reading] }
    }

    /// Stops the worker as SIGTERM does (drain, commit, close) and starts a new one on the same
    /// configuration, topics, group and ledger: a restart.
    func restartWorker() async throws {
        await stopWorker()
        try await startWorker()
    }

    /// Stops the worker as SIGTERM does: what is produced meanwhile waits in Kafka.
    func stopWorker() async {
        worker.shutdown()
        await tasks.withLock { $0 }[0].value
    }

    /// Starts a new worker after ``stopWorker()``, on the same configuration, topics, group and ledger.
    func startWorker() async throws {
        let next = try await WorkerAssembly.make(configuration, logger: workerLogger)
        current.value.withLock { $0 = next }
        let running = Task { do { try await next.run() } catch { Issue.record("worker failed: \(error)") } }
        tasks.withLock { $0[0] = running }
    }

    /// Puts `other` in the running worker's place for the notification receiver (not started, not consuming);
    /// returns the one it replaced. For a receiver whose broker goes away and comes back.
    func swapReceiverWorker(_ other: Worker) -> Worker {
        current.value.withLock { current in
            defer { current = other }
            return current
        }
    }

    func stop() async {
        worker.shutdown()
        let all = tasks.withLock { $0 }
        await all[0].value
        await reader.close()
        await all[1].value
        await producer.close()
        receiver?.stop()
        http.shutdown()
        simulator.stop()
    }

    typealias Purchase = SimulatorAdmin.Purchase

    var admin: SimulatorAdmin { SimulatorAdmin(baseURL: simulator.baseURL, http: http) }

    func purchase(_ fields: [String: Any]) async throws -> Purchase { try await admin.purchase(fields) }

    func faults(_ fields: [String: Any]) async throws { try await admin.faults(fields) }

    func submit(_ job: [String: Any], key: String? = nil) async throws {
        try await submit(raw: try JSONSerialization.data(withJSONObject: job), key: key ?? job["order_id"] as? String)
    }

    /// Sends the jobs together: they reach the worker within one fetch, not one delivery report apart each.
    func submit(together jobs: [[String: Any]]) async throws {
        let messages = try jobs.map { (try JSONSerialization.data(withJSONObject: $0), $0["order_id"] as? String) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (raw, key) in messages { group.addTask { try await self.submit(raw: raw, key: key) } }
            try await group.waitForAll()
        }
    }

    func submit(raw: Data, key: String?, headers: [MessageHeader] = []) async throws {
        _ = try await producer.send(
            OutboundMessage(
                topic: topics.jobs, key: key.map { Array($0.utf8) }, value: Array(raw), headers: headers))
        ContractCapture.record(
            channel: "jobs", key: key.map { Array($0.utf8) }, headers: headers.map { ($0.name, $0.value) },
            value: Array(raw))
    }

    /// Result events of one job, decoded, as they arrived.
    func results(jobID: String) -> [[String: Any]] {
        resultMessages(jobID: jobID).compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.value))) as? [String: Any]
        }
    }

    func resultMessages(jobID: String) -> [InboundMessage] { resultsByJob.withLock { $0[jobID] ?? [] } }

    var deadLetters: [InboundMessage] { received.withLock { $0 }.filter { $0.topic == topics.dlq } }

    /// Records on the notifications topic, as the receiver produced them.
    var notificationRecords: [InboundMessage] {
        received.withLock { $0 }.filter { $0.topic == topics.notifications }
    }

    /// Result events of one type, whatever their key, decoded, as they arrived.
    func resultEvents(type: String) -> [[String: Any]] {
        received.withLock { $0 }.filter { $0.topic == topics.results }.compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.value))) as? [String: Any]
        }.filter { $0["type"] as? String == type }
    }

    /// Result records of any type of one order, as they arrived.
    func eventMessages(orderID: String) -> [InboundMessage] { resultsByOrder.withLock { $0[orderID] ?? [] } }

    /// Result events of any type (grants, denials, events after the grant) of one order, decoded.
    func events(orderID: String) -> [[String: Any]] {
        resultsByOrder.withLock { $0[orderID] ?? [] }.compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.value))) as? [String: Any]
        }
    }

    /// ``events(orderID:)`` each once, in the order first published: an event published again (a notification Apple
    /// sent again, a record delivered again) keeps its event id (at least once, contract section 6), and a grant
    /// service credits it once.
    func distinctEvents(orderID: String) -> [[String: Any]] {
        var seen: Set<String> = []
        return events(orderID: orderID).filter { seen.insert($0["event_id"] as? String ?? "").inserted }
    }

    /// Produces a consumption answer (a grant service's) to the consumption topic.
    func answerConsumption(_ answer: [String: Any]) async throws {
        let value = try JSONSerialization.data(withJSONObject: answer)
        let key = (answer["transaction_id"] as? String).map { Array($0.utf8) }
        _ = try await producer.send(
            OutboundMessage(topic: topics.consumption, key: key, value: Array(value)))
        ContractCapture.record(channel: "consumption", key: key, headers: [], value: Array(value))
    }

    /// Waits for the first result of `jobID`.
    func result(jobID: String, timeout: Duration = .seconds(60)) async -> [String: Any]? {
        _ = await eventually(timeout: timeout) { !self.results(jobID: jobID).isEmpty }
        return results(jobID: jobID).first
    }

    /// The sum of the worker's metric `name` over its series whose labels include each of `labels`
    /// (`type="REFUND"`, say); 0 without any.
    func metric(_ name: String, _ labels: String...) -> Double {
        worker.metrics.registry.render().split(separator: "\n").filter { line in
            (line.hasPrefix(name + "{") || line.hasPrefix(name + " ")) && labels.allSatisfy { line.contains($0) }
        }.compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
    }

    /// Records produced to the notifications topic so far (the high watermarks of its two partitions): what the
    /// receiver put there, whether or not the reader has read it yet.
    func notificationsProduced() async throws -> Int64 {
        var produced: Int64 = 0
        for partition in 0..<2 {
            let marks = try await reader.watermarks(
                TopicPartition(topic: topics.notifications, partition: Int32(partition)))
            produced += marks.high - marks.low
        }
        return produced
    }

    /// The `expires_at` of the ledger's lease `name` as stored (nil: never taken). A chore that takes a lease (the
    /// sweep, the status checks, the answers by policy) renews it as each of its rounds begins.
    func leaseExpiry(_ name: String) -> String? {
        let url = configuration.ledgerURL
        guard url.hasPrefix("sqlite:") else {
            return psqlValue(url, "SELECT expires_at FROM \(configuration.ledgerSchema).leases WHERE name = '\(name)'")
        }
        var database: OpaquePointer?
        defer { sqlite3_close(database) }
        guard sqlite3_open_v2(String(url.dropFirst("sqlite:".count)), &database, SQLITE_OPEN_READONLY, nil) == SQLITE_OK
        else { return nil }
        sqlite3_busy_timeout(database, 5_000)
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard
            sqlite3_prepare_v2(database, "SELECT expires_at FROM leases WHERE name = ?1", -1, &statement, nil)
                == SQLITE_OK,
            sqlite3_bind_text(statement, 1, name, -1, csqlite_transient()) == SQLITE_OK,
            sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0)
        else { return nil }
        return String(cString: text)
    }

    /// Waits until the chore that takes lease `name` has begun `count` rounds since the call (so `count - 1` of
    /// them ran to their end), as its lease's renewals show. False past `timeout`.
    func choreRounds(lease name: String, count: Int, timeout: Duration = .seconds(60)) async -> Bool {
        var seen = Set([leaseExpiry(name)].compactMap { $0 })
        var begun = 0
        return await eventually(timeout: timeout) {
            if let expiry = leaseExpiry(name), seen.insert(expiry).inserted { begun += 1 }
            return begun >= count
        }
    }
}

/// The worker a harness runs now, shared with its notification receiver (a restart replaces it).
final class CurrentWorker: Sendable {
    let value: Mutex<Worker>
    init(_ worker: Worker) { value = Mutex(worker) }
}

func job(_ id: String, order: String, product: String, _ proof: [String: Any], quantity: Int? = nil) -> [String: Any] {
    var job: [String: Any] = ["job_id": id, "order_id": order, "user_id": "player-1", "product_id": product]
    job.merge(proof) { $1 }
    if let quantity { job["quantity"] = quantity }
    return job
}
