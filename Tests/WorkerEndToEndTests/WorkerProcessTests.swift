import AppStoreSimulator
import Foundation
import HTTPClient
import Kafka
import Observability
import Synchronization
import TestSupport
import Testing

/// Worker processes against a broker, the simulator and a ledger, with a reader of what they publish.
final class ProcessHarness: Sendable {
    let simulator: AppStoreSimulator
    let http: HTTPClient
    let producer: KafkaProducer
    let reader: KafkaConsumer
    let suffix = UUID().uuidString.prefix(8).lowercased()
    private let received = Mutex<[String: [Data]]>([:])  // job id -> raw result events
    private let afterGrant = Mutex<[String: [String]]>([:])  // notification id -> event ids published
    private let byOrder = Mutex<[String: [Data]]>([:])  // order id -> raw result events
    private let letters = Mutex<[InboundMessage]>([])  // the dead-letter topic's messages
    private let readerTask = Mutex<Task<Void, Never>?>(nil)
    /// Whether the consumption topic (`consumption-SUFFIX`) was made, and the workers are configured with it.
    let consumption: Bool
    static let logger = Logger(label: "e2e-process", minimumLevel: .error)

    /// `simulator`: how the simulator signs (a chain of the test's, say); `consumption`: a consumption topic too.
    init(
        jobsPartitions: Int = 4, simulator configuration: AppStoreSimulator.Configuration = .init(),
        consumption: Bool = false
    ) async throws {
        simulator = try AppStoreSimulator(configuration: configuration)
        simulator.start()
        http = HTTPClient(logger: Self.logger)
        self.consumption = consumption
        let bootstrap = WorkerHarness.bootstrap
        try await KafkaAdmin.createTopics(
            bootstrapServers: bootstrap,
            topics: [
                ("jobs-\(suffix)", jobsPartitions), ("results-\(suffix)", 1), ("dlq-\(suffix)", 1),
                ("notifications-\(suffix)", 2),
            ] + (consumption ? [("consumption-\(suffix)", 1)] : []),
            logger: Self.logger)
        producer = try KafkaProducer(configuration: .init(bootstrapServers: bootstrap), logger: Self.logger)
        reader = try KafkaConsumer(
            configuration: .init(
                bootstrapServers: bootstrap, groupID: "reader-\(suffix)",
                properties: [
                    "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "max.poll.interval.ms": "10000",
                ]),
            logger: Self.logger)
        try await reader.assign(topics: ["results-\(suffix)", "dlq-\(suffix)"], from: .beginning)
        let task = Task { [self] in
            for await event in self.reader.events {
                if case .message(let message) = event, message.topic == "dlq-\(self.suffix)" {
                    ContractCapture.record(
                        channel: "dlq", key: message.key, headers: message.headers.map { ($0.name, $0.value) },
                        value: message.value)
                    self.letters.withLock { $0.append(message) }
                    continue
                }
                if case .message(let message) = event {
                    ContractCapture.record(
                        channel: "results", key: message.key, headers: message.headers.map { ($0.name, $0.value) },
                        value: message.value)
                }
                guard case .message(let message) = event,
                    let object = (try? JSONSerialization.jsonObject(with: Data(message.value))) as? [String: Any]
                else { continue }
                if let notification = object["notification_id"] as? String, let eventID = object["event_id"] as? String
                {
                    self.afterGrant.withLock { $0[notification, default: []].append(eventID) }
                }
                if let order = object["order_id"] as? String {
                    let value = Data(message.value)
                    self.byOrder.withLock { $0[order, default: []].append(value) }
                }
                guard let jobID = object["job_id"] as? String else { continue }
                let value = Data(message.value)
                self.received.withLock { $0[jobID, default: []].append(value) }
            }
        }
        readerTask.withLock { $0 = task }
    }

    func config(ledger: String, extra: [String: String] = [:]) throws -> String {
        try WorkerProcess.writeConfig(
            [
                "apple.bundle_id": "com.example",
                "apple.verify_receipt.production_url": "\(simulator.baseURL)/production/verifyReceipt",
                "apple.verify_receipt.sandbox_url": "\(simulator.baseURL)/sandbox/verifyReceipt",
                "apple.allow_insecure_urls": "true",
                "apple.root_certificates": try rootFile(),
                "ledger.url": ledger, "topics.jobs": "jobs-\(suffix)", "topics.results": "results-\(suffix)",
                "topics.dlq": "dlq-\(suffix)", "topics.notifications": "notifications-\(suffix)",
                "apple.app_apple_id": String(AppStoreSimulator.Configuration().appAppleID),
                "retry.initial_backoff_ms": "20", "retry.max_backoff_ms": "500",
                "worker.drain_timeout_ms": "5000", "kafka.bootstrap.servers": WorkerHarness.bootstrap,
                "kafka.group.id": "workers-\(suffix)", "kafka.session.timeout.ms": "6000",
                "kafka.heartbeat.interval.ms": "500",
                "kafka.max.poll.interval.ms": "10000",
            ].merging(consumption ? ["topics.consumption": "consumption-\(suffix)"] : [:]) { $1 }.merging(extra) { $1 })
    }

    private func rootFile() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("sim-root-\(suffix).pem").path
        try AppStoreSimulator.testRootPEM.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    var admin: SimulatorAdmin { SimulatorAdmin(baseURL: simulator.baseURL, http: http) }

    func purchase(product: String) async throws -> (transaction: String, receipt: String) {
        let purchase = try await admin.purchase(["product_id": product])
        return (purchase.transactionID, purchase.receipt)
    }

    func faults(_ fields: [String: Any]) async throws { try await admin.faults(fields) }

    func submit(_ jobs: [[String: Any]]) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, job) in jobs.enumerated() {
                if index >= 500 { try await group.next() }
                let value = try JSONSerialization.data(withJSONObject: job)
                let key = job["order_id"] as? String ?? ""
                group.addTask {
                    _ = try await self.producer.send(
                        OutboundMessage(topic: "jobs-\(self.suffix)", key: Array(key.utf8), value: Array(value)))
                    ContractCapture.record(channel: "jobs", key: Array(key.utf8), headers: [], value: Array(value))
                }
            }
            try await group.waitForAll()
        }
    }

    /// Event ids published per notification id (events after the grant).
    var notificationEvents: [String: [String]] { afterGrant.withLock { $0 } }

    /// The events published for `order` of `type` (every type when nil), decoded, in the order they came.
    func events(order: String, type: String? = nil) -> [[String: Any]] {
        byOrder.withLock { $0[order] ?? [] }.compactMap {
            (try? JSONSerialization.jsonObject(with: $0)) as? [String: Any]
        }
        .filter { type == nil || $0["type"] as? String == type }
    }

    /// What reached the dead-letter topic so far.
    var deadLetters: [InboundMessage] { letters.withLock { $0 } }

    /// Produces a grant service's answer to a consumption (refund) request, as a grant service does.
    func answerConsumption(_ answer: [String: Any]) async throws {
        let value = try JSONSerialization.data(withJSONObject: answer)
        let key = Array((answer["transaction_id"] as? String ?? "").utf8)
        _ = try await producer.send(
            OutboundMessage(topic: "consumption-\(suffix)", key: key, value: Array(value)))
        ContractCapture.record(channel: "consumption", key: key, headers: [], value: Array(value))
    }

    /// Produces notification records to the notifications topic as the receiver does: key, value as received,
    /// the notification's headers.
    func submitNotifications(_ records: [(key: String, body: Data, headers: [(String, String)])]) async throws {
        for record in records {
            let headers = record.headers.map { MessageHeader(name: $0.0, string: $0.1) }
            _ = try await producer.send(
                OutboundMessage(
                    topic: "notifications-\(suffix)", key: Array(record.key.utf8), value: Array(record.body),
                    headers: headers))
            ContractCapture.record(
                channel: "notifications", key: Array(record.key.utf8), headers: headers.map { ($0.name, $0.value) },
                value: Array(record.body))
        }
    }

    /// Jobs answered so far (cheap: no decoding).
    var answeredJobs: Int { received.withLock { $0.count } }

    /// Every job's result events, decoded.
    var results: [String: [[String: Any]]] {
        received.withLock { $0 }.mapValues { events in
            events.compactMap { (try? JSONSerialization.jsonObject(with: $0)) as? [String: Any] }
        }
    }

    func stop() async {
        await reader.close()
        await readerTask.withLock { $0 }?.value
        await producer.close()
        http.shutdown()
        simulator.stop()
    }
}

@Suite("Worker processes", .timeLimit(.minutes(5)))
struct WorkerProcessTests {
    @Test(
        "two worker processes sharing PostgreSQL, each receipt submitted under two orders at once: exactly one grant each; SIGTERM exits 0"
    )
    func twoWorkersOnePostgres() async throws {
        let harness = try await ProcessHarness()
        let secret = "s3cret-\(UUID().uuidString)"
        // kafka.debug: librdkafka's own lines, routed into the worker's log.
        let config = try harness.config(
            ledger: try makePostgresDatabase(), extra: ["apple.shared_secret": secret, "kafka.debug": "cgrp"])
        let debug = ["LOG_LEVEL": "debug"]  // the most a log says: still no receipt, no secret
        let workers = [
            try WorkerProcess(config: config, environment: debug),
            try WorkerProcess(config: config, environment: debug),
        ]
        // Both must be in the group before the jobs arrive, or one worker would take them all.
        #expect(
            await eventually(timeout: .seconds(60)) { workers.allSatisfy { $0.log.contains("partitions assigned") } })
        var jobs: [[String: Any]] = []
        var receipts: [String] = []
        for index in 0..<40 {
            let purchase = try await harness.purchase(product: "coins")
            receipts.append(purchase.receipt)
            for side in ["a", "b"] {
                jobs.append(
                    job(
                        "\(side)-\(index)", order: "order-\(side)-\(index)", product: "coins",
                        ["receipt": purchase.receipt]))
            }
        }
        try await harness.submit(jobs)
        #expect(await eventually(timeout: .seconds(60)) { harness.answeredJobs == 80 })
        let results = harness.results
        for index in 0..<40 {
            let decisions = ["a", "b"].compactMap { results["\($0)-\(index)"]?.first }
            #expect(decisions.filter { $0["decision"] as? String == "grant" }.count == 1)
            #expect(decisions.filter { $0["reason"] as? String == "duplicate_transaction" }.count == 1)
        }
        for worker in workers {
            #expect(await worker.stop(SIGTERM) == 0, "exit status after SIGTERM; log:\n\(worker.log.suffix(2000))")
        }
        // Logs: one JSON object per line with a level, librdkafka's among them, never a receipt or the secret.
        for worker in workers {
            let lines = worker.log.split(separator: "\n")
            #expect(lines.count > 10)
            for line in lines {
                let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
                #expect(
                    object?["level"] is String && object?["message"] is String, "not a log object: \(line.prefix(200))")
            }
            #expect(!worker.log.contains(secret))
            #expect(!receipts.contains { worker.log.contains($0) })
            #expect(worker.log.contains("\"source\":\"librdkafka\""))
        }
        await harness.stop()
    }

    @Test(
        "Apple's limit is the pool's: three replicas told 10 a second send 10 a second together, and Apple answers no 429"
    )
    func poolKeepsAppleLimit() async throws {
        let harness = try await ProcessHarness(jobsPartitions: 6)
        // Apple (the simulator) answers 429 past 10 a second for the app's Get Transaction Info.
        try await harness.faults(["rate_limit_per_second": 10])
        let key = MetricsEndpointTests.repositoryRoot.appendingPathComponent("Tests/AppleClientTests/testSigningKey.p8")
        let config = try harness.config(
            ledger: try makePostgresDatabase(),
            extra: [
                "apple.api.key_id": "keyId", "apple.api.issuer_id": "issuerId", "apple.api.private_key_file": key.path,
                "apple.api.production_url": "\(harness.simulator.baseURL)/production",
                "apple.api.sandbox_url": "\(harness.simulator.baseURL)/sandbox",
                "apple.api.max_requests_per_second": "10", "apple.transaction_id_requires_account_token": "false",
                "retry.max_attempts": "50",
            ])
        let workers = try (0..<3).map { _ in try WorkerProcess(config: config) }
        // Every replica in the group, owning two of the six partitions, before the jobs arrive.
        #expect(
            await eventually(timeout: .seconds(60)) {
                workers.allSatisfy { $0.partitionsHeld(of: "jobs-\(harness.suffix)").count == 2 }
            }, "\(workers.map { $0.partitionsHeld(of: "jobs-\(harness.suffix)").sorted() })")
        var jobs: [[String: Any]] = []
        for index in 0..<150 {
            let purchase = try await harness.admin.purchase(["product_id": "coins"])
            jobs.append(
                job("r-\(index)", order: "r-\(index)", product: "coins", ["transaction_id": purchase.transactionID]))
        }
        let started = ContinuousClock.now
        try await harness.submit(jobs)
        #expect(await eventually(timeout: .seconds(90)) { harness.answeredJobs == 150 })
        let elapsed = ContinuousClock.now - started
        let results = harness.results
        #expect((0..<150).allSatisfy { results["r-\($0)"]?.first?["decision"] as? String == "grant" })
        let response = try await harness.http.execute(HTTPRequest(url: "\(harness.simulator.baseURL)/admin/stats"))
        let counts = (try JSONSerialization.jsonObject(with: response.body) as? [String: Int]) ?? [:]
        let requests = counts["production.transactionInfo"] ?? 0
        // One call per job, and the 429s of the moments a rebalance moved shares: at most a tenth more.
        #expect(requests >= 150 && requests <= 165, "\(requests) calls for 150 jobs: \(requests - 150) met a 429")
        // Together they kept under Apple's 10 a second (each a third: 3 a second).
        #expect(elapsed >= .seconds(14), "150 calls at 10 a second or less take 14 s or more: \(elapsed)")
        for worker in workers { #expect(await worker.stop(SIGTERM) == 0) }
        await harness.stop()
    }

    @Test(
        "a worker waiting for its PostgreSQL (or migrating it) serves /healthz 200 and /readyz 503 saying so: a startup probe does not kill it; its build_info names jemalloc"
    )
    func probesWhileTheLedgerOpens() async throws {
        let harness = try await ProcessHarness()
        let config = try harness.config(
            ledger: "postgresql://receipt:pw@127.0.0.1:1/nowhere", extra: ["metrics.listen": "127.0.0.1:0"])
        let worker = try WorkerProcess(config: config)
        #expect(await eventually(timeout: .seconds(60)) { worker.log.contains("cannot open the ledger; retrying") })
        let line = try #require(worker.log.split(separator: "\n").first { $0.contains("metrics endpoint listening") })
        let port = try #require(line.firstMatch(of: /"port":"([0-9]+)"/).map { String($0.1) })
        let base = "http://127.0.0.1:\(port)"
        let health = try await harness.http.execute(HTTPRequest(url: "\(base)/healthz"))
        #expect(health.status == 200)
        let ready = try await harness.http.execute(HTTPRequest(url: "\(base)/readyz"))
        #expect(ready.status == 503 && String(decoding: ready.body, as: UTF8.self).contains("starting"))
        // Not ready, said by the gauge the alert reads (not absent, which no rule of the worker's would see).
        let metrics = String(
            decoding: try await harness.http.execute(HTTPRequest(url: "\(base)/metrics")).body, as: UTF8.self)
        #expect(metrics.contains("\nreceipt_worker_ready 0\n"))
        // The binary as shipped: its malloc is jemalloc's (linked), not glibc's.
        let buildInfo = metrics.split(separator: "\n").first { $0.hasPrefix("receipt_worker_build_info") }
        #expect(
            buildInfo?.hasPrefix("receipt_worker_build_info{allocator=\"jemalloc 5.") == true, "\(buildInfo ?? "none")")
        #expect(!worker.log.contains("pw@"), "the ledger URL's password is in the log")
        await worker.stop(SIGKILL)
        await harness.stop()
    }

    @Test(
        "SIGTERM while the worker waits for its ledger at start-up (PostgreSQL not answering): it exits 0 at once, not at the grace period's SIGKILL"
    )
    func stopWhileStarting() async throws {
        let harness = try await ProcessHarness()
        // Nothing listens on port 1: the pool retries with backoff, forever, until told to stop.
        let config = try harness.config(ledger: "postgresql://receipt_worker@127.0.0.1:1/none")
        let worker = try WorkerProcess(config: config)
        #expect(await eventually(timeout: .seconds(30)) { worker.log.contains("cannot open the ledger; retrying") })
        let stopped = ContinuousClock.now
        #expect(await worker.stop(SIGTERM) == 0, "log:\n\(worker.log.suffix(2000))")
        #expect(ContinuousClock.now - stopped < .seconds(10), "SIGTERM waited for the ledger")
        #expect(worker.log.contains("stopped while starting"))
    }

    @Test(
        "SIGTERM while the worker waits for its broker at start-up (the ledger open, no broker answering): it exits 0 without starting, not at the grace period's SIGKILL"
    )
    func stopWhileWaitingForTheBroker() async throws {
        let harness = try await ProcessHarness()
        let ledger =
            "sqlite:"
            + FileManager.default.temporaryDirectory.appendingPathComponent("nobroker-\(harness.suffix).sqlite").path
        // Nothing listens on port 1: each look at a topic waits out its metadata timeout, then is retried.
        let config = try harness.config(ledger: ledger, extra: ["kafka.bootstrap.servers": "127.0.0.1:1"])
        let worker = try WorkerProcess(config: config)
        #expect(await eventually(timeout: .seconds(60)) { worker.log.contains("cannot describe topic") })
        let stopped = ContinuousClock.now
        #expect(await worker.stop(SIGTERM) == 0, "log:\n\(worker.log.suffix(2000))")
        // At most the one metadata wait in progress (10 s), never the retries after it.
        #expect(ContinuousClock.now - stopped < .seconds(20), "SIGTERM waited for the broker")
        #expect(!worker.log.contains("worker started"))
        await harness.stop()
    }

    @Test("kill -9 in the middle of 5,000 jobs, then a restart: every job has a result, no transaction granted twice")
    func killNine() async throws {
        let harness = try await ProcessHarness()
        let ledger =
            "sqlite:"
            + FileManager.default.temporaryDirectory.appendingPathComponent("kill9-\(harness.suffix).sqlite").path
        let config = try harness.config(ledger: ledger, extra: ["worker.max_in_flight": "200"])
        try await harness.faults(["latency_ms": 20])
        var jobs: [[String: Any]] = []
        var receipts: [String] = []
        for index in 0..<4_500 {
            let purchase = try await harness.purchase(product: "coins")
            receipts.append(purchase.receipt)
            jobs.append(job("job-\(index)", order: "order-\(index)", product: "coins", ["receipt": purchase.receipt]))
        }
        for index in 0..<500 {  // the same receipts replayed under new orders
            jobs.append(
                job(
                    "replay-\(index)", order: "replay-order-\(index)", product: "coins",
                    ["receipt": receipts[index * 9]]))
        }
        try await harness.submit(jobs.shuffled())

        let first = try WorkerProcess(config: config)
        #expect(await eventually(timeout: .seconds(60)) { harness.answeredJobs >= 1_000 })
        #expect(harness.answeredJobs < 5_000, "the worker finished before it could be killed")
        await first.stop(SIGKILL)
        let second = try WorkerProcess(config: config)
        let complete = await eventually(timeout: .seconds(120)) { harness.answeredJobs == 5_000 }
        #expect(complete, "\(harness.answeredJobs) of 5,000 jobs answered")
        #expect(await second.stop(SIGTERM) == 0)

        let results = harness.results
        var ordersByTransaction: [String: Set<String>] = [:]
        for (_, events) in results {
            #expect(Set(events.compactMap { $0["event_id"] as? String }).count == 1, "a job answered twice differently")
            for event in events where event["decision"] as? String == "grant" {
                ordersByTransaction[event["transaction_id"] as? String ?? "", default: []].insert(
                    event["order_id"] as? String ?? "")
            }
        }
        #expect(ordersByTransaction.values.allSatisfy { $0.count == 1 }, "a transaction was granted to two orders")
        #expect(ordersByTransaction.count == 4_500)
        await harness.stop()
    }

    @Test(
        "kill -9 in the middle of 1,000 refund notifications, then a restart: every refund has its event, no notification two event ids"
    )
    func killNineDuringNotifications() async throws {
        let harness = try await ProcessHarness()
        let ledger =
            "sqlite:"
            + FileManager.default.temporaryDirectory.appendingPathComponent("kill9n-\(harness.suffix).sqlite").path
        let config = try harness.config(ledger: ledger, extra: ["worker.max_in_flight": "50"])
        var jobs: [[String: Any]] = []
        var transactions: [String] = []
        for index in 0..<1_000 {
            let purchase = try await harness.purchase(product: "gems")
            transactions.append(purchase.transaction)
            jobs.append(job("job-\(index)", order: "order-\(index)", product: "gems", ["receipt": purchase.receipt]))
        }
        try await harness.submit(jobs)
        let granting = try WorkerProcess(config: config)
        #expect(await eventually(timeout: .seconds(90)) { harness.answeredJobs == 1_000 })
        #expect(await granting.stop(SIGTERM) == 0)
        // Apple refunds every purchase; the receiver (not running here) would have produced these records.
        for transaction in transactions {
            _ = try await harness.admin.notify("refund", ["transaction_id": transaction])
        }
        let sent = try await harness.admin.notifications()
        let records = sent.compactMap { item -> (key: String, body: Data, headers: [(String, String)])? in
            guard let signed = item["signed_payload"] as? String, let key = item["transaction_id"] as? String,
                let uuid = item["notification_uuid"] as? String
            else { return nil }
            let headers = [
                ("notification_type", "REFUND"), ("notification_subtype", ""), ("notification_uuid", uuid),
                ("bundle_id", "com.example"), ("environment", item["environment"] as? String ?? "Production"),
            ]
            return (key, Data("{\"signedPayload\":\"\(signed)\"}".utf8), headers)
        }
        #expect(records.count == 1_000)
        try await harness.submitNotifications(records)
        // One notification at a time, so that the kill lands in the middle however fast the machine is (50 at a
        // time, the 1,000 were once all published before the test could kill the worker).
        let oneAtATime = try harness.config(ledger: ledger, extra: ["worker.max_in_flight": "1"])
        let first = try WorkerProcess(config: oneAtATime)
        #expect(await eventually(timeout: .seconds(60)) { harness.notificationEvents.count >= 50 })
        #expect(harness.notificationEvents.count < 1_000, "the worker finished before it could be killed")
        await first.stop(SIGKILL)
        let second = try WorkerProcess(config: config)
        let complete = await eventually(timeout: .seconds(120)) { harness.notificationEvents.count == 1_000 }
        #expect(complete, "\(harness.notificationEvents.count) of 1,000 refunds published")
        // Stopped once it is running (a SIGTERM during its start-up is not the drain this test means).
        #expect(await eventually(timeout: .seconds(60)) { second.log.contains("partitions assigned") })
        #expect(await second.stop(SIGTERM) == 0)
        for (notification, ids) in harness.notificationEvents {
            #expect(Set(ids).count == 1, "notification \(notification) published two event ids")
        }
        await harness.stop()
    }
}
