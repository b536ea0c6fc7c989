import AppStoreSimulator
import AppleVerification
import Crypto
import Foundation
import HTTPClient
import Kafka
import ReceiptWorker
import TestSupport
import Testing
import Configuration
import Flows
import Observability

/// Two games in one pool, tried as a second game, an attacker and an unlucky operator would: one
/// game's ids, limits, failures or forgeries never reach the other.
@Suite("Games in one pool are isolated", .timeLimit(.minutes(3)))
struct IsolationEndToEndTests {
    static let second = ManyAppsEndToEndTests.second

    @Test("two games numbering their jobs and orders from 1: each job is granted its own purchase, never the other's")
    func idsPerGame() async throws {
        let harness = try await ManyAppsEndToEndTests.twoApps()
        let mine = try await harness.purchase(["product_id": "gems_100"])
        let theirs = try await harness.purchase(["product_id": "coins_5", "bundle_id": Self.second])
        try await harness.submit(job("1", order: "1", product: "gems_100", ["receipt": mine.receipt]))
        #expect(await harness.result(jobID: "1")?["transaction_id"] as? String == mine.transactionID)
        try await harness.submit(
            job(
                "1", order: "1", product: "coins_5",
                ["signed_transaction": theirs.signedTransaction, "bundle_id": Self.second]))
        let answered = await eventually { harness.results(jobID: "1").count == 2 }
        #expect(answered)
        let events = harness.results(jobID: "1")
        let second = try #require(events.first { $0["bundle_id"] as? String == Self.second })
        #expect(second["decision"] as? String == "grant", "\(second)")
        #expect(second["transaction_id"] as? String == theirs.transactionID)
        #expect(Set(events.compactMap { $0["event_id"] as? String }).count == 2)
        await harness.stop()
    }

    /// Game B's 30 jobs (`PREFIX-0`...), each for a purchase of its own, sent together while its lane answers 429
    /// until the test lifts the outage (`faults([:])`), however slow the machine: a rate limit alone let B's backlog
    /// drain while the jobs were still being sent. Returns the purchases' transaction ids, in the jobs' order.
    static func holdSecondGame(_ harness: WorkerHarness, jobs prefix: String) async throws -> [String] {
        var theirs: [String] = []
        for _ in 0..<30 {
            theirs.append(try await harness.purchase(["product_id": "coins_5", "bundle_id": second]).transactionID)
        }
        try await harness.faults([
            "outage_start_in_ms": 0, "outage_seconds": 600, "outage_mode": "rate_limited", "bundle_id": second,
        ])
        try await harness.submit(
            together: theirs.enumerated().map { index, id in
                job(
                    "\(prefix)-\(index)", order: "\(prefix)-\(index)", product: "coins_5",
                    ["transaction_id": id, "bundle_id": second])
            })
        return theirs
    }

    @Test(
        "one game's lane answers 429 while more of its jobs wait than worker.max_in_flight: the other game's jobs are answered at once"
    )
    func rateLimitedGame() async throws {
        let harness = try await ManyAppsEndToEndTests.twoApps {
            $0.maxInFlight = 4
            $0.retry.maxAttempts = 60
            $0.apple.apiMaxLanePause = .seconds(1)  // a lane asks again each second while its outage lasts
        }
        let theirs = try await Self.holdSecondGame(harness, jobs: "b")
        var mine: [String: [String: Any]] = [:]
        for index in 0..<3 {
            let purchase = try await harness.purchase(["product_id": "gems_100"])
            mine["a-signed-\(index)"] = ["signed_transaction": purchase.signedTransaction]
            let other = try await harness.purchase(["product_id": "gems_100"])
            mine["a-id-\(index)"] = ["transaction_id": other.transactionID]
            let third = try await harness.purchase(["product_id": "gems_100"])
            mine["a-receipt-\(index)"] = ["receipt": third.receipt]
        }
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.worker.metrics.registry.render().contains(
                    "receipt_worker_apple_lane_pauses_total{app=\"second\"")
            })
        try await harness.submit(together: mine.map { id, proof in job(id, order: id, product: "gems_100", proof) })
        for id in mine.keys {
            #expect(await harness.result(jobID: id, timeout: .seconds(60))?["decision"] as? String == "grant", "\(id)")
        }
        // The other game's jobs were answered while the rate-limited game's still waited for its lane.
        let pending = theirs.indices.filter { harness.results(jobID: "b-\($0)").isEmpty }.count
        #expect(pending > 0, "the rate-limited game still had jobs waiting when the other's were answered")
        try await harness.faults([:])
        let all = await eventually(timeout: .seconds(60)) {
            theirs.indices.allSatisfy { harness.results(jobID: "b-\($0)").first?["decision"] as? String == "grant" }
        }
        #expect(all, "every job of the rate-limited game is granted once Apple takes it")
        await harness.stop()
    }

    @Test(
        "one game's jobs overflow its waiting room while its lane is paused: they wait on topics.retries, the jobs topic never pauses, the other game is answered at once, and every one is granted"
    )
    func parkedGame() async throws {
        let harness = try await ManyAppsEndToEndTests.twoApps(parking: true) {
            $0.maxInFlight = 1  // a waiting room of 10
            $0.retry.maxAttempts = 60
            $0.apple.apiMaxLanePause = .seconds(1)  // a lane asks again each second while its outage lasts
        }
        let theirs = try await Self.holdSecondGame(harness, jobs: "p")
        var mine: [SimulatorAdmin.Purchase] = []
        for _ in 0..<3 { mine.append(try await harness.purchase(["product_id": "gems_100"])) }
        let metrics = { harness.worker.metrics.registry.render() }
        #expect(
            await eventually(timeout: .seconds(60)) {
                metrics().contains(#"receipt_worker_messages_parked_total{group="second"}"#)
                    && !metrics().contains(#"receipt_worker_messages_parked_total{group="second"} 0"#)
            }, "the overflow was parked")
        #expect(metrics().contains(#"receipt_worker_topic_paused{topic="\#(harness.topics.jobs)"} 0"#))
        try await harness.submit(
            together: mine.enumerated().map { index, purchase in
                job("mine-\(index)", order: "mine-\(index)", product: "gems_100", ["receipt": purchase.receipt])
            })
        for index in 0..<3 {
            #expect(
                await harness.result(jobID: "mine-\(index)", timeout: .seconds(60))?["decision"] as? String == "grant")
        }
        let pending = theirs.indices.filter { harness.results(jobID: "p-\($0)").isEmpty }.count
        #expect(pending > 0, "the rate-limited game still had jobs waiting when the other's were answered")
        try await harness.faults([:])
        let all = await eventually(timeout: .seconds(90)) {
            theirs.indices.allSatisfy { harness.results(jobID: "p-\($0)").first?["decision"] as? String == "grant" }
        }
        #expect(all, "every parked job is granted once Apple takes it")
        #expect(theirs.indices.allSatisfy { harness.results(jobID: "p-\($0)").count == 1 }, "each answered once")
        await harness.stop()
    }

    @Test("Apple failing for one game opens that game's circuit only: the other game's receipts are granted")
    func failingGame() async throws {
        let harness = try await ManyAppsEndToEndTests.twoApps { $0.retry.maxAttempts = 100 }
        try await harness.faults(["error_rate": 1.0, "error_status": 503, "bundle_id": Self.second])
        for index in 0..<10 {
            let purchase = try await harness.purchase(["product_id": "coins_5", "bundle_id": Self.second])
            try await harness.submit(
                job(
                    "f-\(index)", order: "f-\(index)", product: "coins_5",
                    ["receipt": purchase.receipt, "bundle_id": Self.second]))
        }
        let metrics = { harness.worker.metrics.registry.render() }
        #expect(
            await eventually(timeout: .seconds(60)) {
                metrics().contains(
                    #"receipt_worker_circuit_state{app="second",call="verify_receipt_production",state="open"} 1"#)
            })
        for index in 0..<5 {
            let purchase = try await harness.purchase(["product_id": "gems_100"])
            try await harness.submit(
                job("ok-\(index)", order: "ok-\(index)", product: "gems_100", ["receipt": purchase.receipt]))
        }
        for index in 0..<5 {
            #expect(
                await harness.result(jobID: "ok-\(index)", timeout: .seconds(60))?["decision"] as? String == "grant")
        }
        #expect(
            metrics().contains(
                #"receipt_worker_circuit_state{app="default",call="verify_receipt_production",state="closed"} 1"#))
        #expect(metrics().contains("receipt_worker_intake_paused 0"))
        try await harness.faults([:])
        #expect(
            await eventually(timeout: .seconds(60)) {
                (0..<10).allSatisfy { harness.results(jobID: "f-\($0)").first?["decision"] as? String == "grant" }
            })
        await harness.stop()
    }

    @Test(
        "forged notifications carrying Apple's chain in headers of their own are refused 400, validate no chain, and never evict the real one"
    )
    func forgedNotifications() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let receiver = try #require(harness.receiver)
        let url = "http://127.0.0.1:\(receiver.port)/notifications/apple"
        // The genuine chain, as Apple's notifications carry it, around payloads nobody signed.
        let genuine = try await harness.purchase(["product_id": "coins_100"])
        let header = String(genuine.signedTransaction.split(separator: ".")[0])
        let x5c = try #require(
            (try JSONSerialization.jsonObject(with: Base64URL.decode(Substring(header)) ?? Data()) as? [String: Any])?[
                "x5c"] as? [String])
        let payload = Base64URL.encode(
            Data(
                #"{"notificationType":"REFUND","notificationUUID":"forged","signedDate":1767225600000,"data":{"bundleId":"com.example","environment":"Production"}}"#
                    .utf8))
        for attempt in 0..<100 {
            let forgedHeader = Base64URL.encode(
                try JSONSerialization.data(withJSONObject: ["alg": "ES256", "x5c": x5c, "kid": "forged-\(attempt)"]))
            let body = try JSONSerialization.data(withJSONObject: ["signedPayload": "\(forgedHeader).\(payload).AAAA"])
            let response = try await harness.http.execute(HTTPRequest(method: .post, url: url, body: body))
            #expect(response.status == 400)
        }
        let validations = harness.worker.metrics.registry.render().split(separator: "\n")
            .first { $0.hasPrefix(#"receipt_worker_chain_validations_total{app="default"}"#) }
        #expect(validations.map { $0.hasSuffix(" 1") || $0.hasSuffix(" 0") } == true, "\(validations ?? "")")
        // A genuine notification after them is received.
        _ = try await harness.admin.notify("refund", ["transaction_id": genuine.transactionID])
        #expect(await eventually(timeout: .seconds(60)) { !harness.notificationRecords.isEmpty })
        await harness.stop()
    }

    @Test("jobs written by a transactional producer: the commit markers are no unread job, nothing stalls")
    func transactionalProducer() async throws {
        // Short, so that it can pass below (the runtime takes any; the file's range starts at 1 s).
        let stallTimeout = Duration.milliseconds(500)
        let harness = try await WorkerHarness { $0.stallTimeout = stallTimeout }
        let producer = try KafkaProducer(
            configuration: .init(
                bootstrapServers: WorkerHarness.bootstrap, properties: ["transactional.id": "outbox-\(UUID())"]),
            logger: WorkerHarness.logger)
        try await producer.initTransactions()
        var ids: [String] = []
        for batch in 0..<3 {
            try await producer.beginTransaction()
            for index in 0..<4 {
                let purchase = try await harness.purchase(["product_id": "coins_100"])
                let id = "tx-\(batch)-\(index)"
                ids.append(id)
                let value = try JSONSerialization.data(
                    withJSONObject: job(id, order: id, product: "coins_100", ["receipt": purchase.receipt]))
                _ = try await producer.send(
                    OutboundMessage(topic: harness.topics.jobs, key: Array(id.utf8), value: Array(value)))
            }
            try await producer.commitTransaction()
        }
        for id in ids { #expect(await harness.result(jobID: id)?["decision"] as? String == "grant", "\(id)") }
        let committed = await eventually(timeout: .seconds(60)) {
            let text = harness.worker.metrics.registry.render()
            let lags = text.split(separator: "\n").filter { $0.hasPrefix("receipt_worker_partition_lag{") }
            return !lags.isEmpty && lags.allSatisfy { $0.hasSuffix(" 0") }
        }
        #expect(committed, "the commit reached the high watermark past the markers")
        // Nothing stalls: a stall is lag without progress for the stall timeout, so only that time shows there is
        // none (the scenario; the lag is measured every 125 ms meanwhile).
        try await Task.sleep(for: stallTimeout)
        #expect(harness.worker.readiness.isEmpty, "\(harness.worker.readiness)")
        await producer.close()
        await harness.stop()
    }
}
