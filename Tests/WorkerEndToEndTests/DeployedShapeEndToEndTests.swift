import AppStoreSimulator
import Foundation
import HTTPClient
import Synchronization
import TestSupport
import Testing
import Messaging

/// The flows after the grant as deploy/ runs them: `receipt-worker receive` apart from two `receipt-worker run`
/// replicas sharing PostgreSQL, and Apple's signed data made by a chain whose certificates name real OCSP
/// responders (`openssl ocsp`), met for the first time by a process that did not receive it. What Apple was told
/// we have is never lost, and no chore decides on a guess.
@Suite(
    "As deployed: a receiver apart from two workers, PostgreSQL, a chain first met elsewhere", .timeLimit(.minutes(6)))
struct DeployedShapeEndToEndTests {
    /// A receiver process and two worker processes on one PostgreSQL ledger, each with its metrics port; the
    /// simulator signs with the PKI's `good` leaf.
    final class Deployment: Sendable {
        let pki: OCSPTestPKI
        let harness: ProcessHarness
        let receiver: WorkerProcess
        let receiverURL: String
        let workers: [WorkerProcess]
        /// The configuration file of each worker.
        let workerConfigs: [String]
        private let workersRunning = Atomic<Bool>(true)
        /// The workers' metrics ports, then the receiver's.
        let metricsPorts: [UInt16]
        private let receiverRunning = Atomic<Bool>(true)

        /// `responders`: the OCSP responders up at the start; `settings`: the workers' keys beside the shape's own.
        init(
            responders: [OCSPTestPKI.Responder], consumption: Bool = false, settings: [String: String] = [:]
        ) async throws {
            pki = try await OCSPTestPKI.make(starting: responders)
            var simulator = AppStoreSimulator.Configuration()
            simulator.signingKeyPEM = try String(contentsOfFile: pki.file("good.key"), encoding: .utf8)
            simulator.signingChainPEM = try pki.chainPEM(of: "good")
            harness = try await ProcessHarness(simulator: simulator, consumption: consumption)
            let key = MetricsEndpointTests.repositoryRoot.appendingPathComponent(
                "Tests/AppleClientTests/testSigningKey.p8")
            let common = [
                // Apple's signed data is trusted through the PKI's root, and its revocation asked online (the
                // default, `apple.revocation_check=ocsp`).
                "apple.root_certificates": pki.file("root.pem"),
                "apple.api.key_id": "keyId", "apple.api.issuer_id": "issuerId",
                "apple.api.private_key_file": key.path,
                "apple.api.production_url": "\(harness.simulator.baseURL)/production",
                "apple.api.sandbox_url": "\(harness.simulator.baseURL)/sandbox",
                "notifications.sweep_interval_ms": "0", "subscriptions.status_check_interval_ms": "0",
            ]
            let ledger = try makePostgresDatabase()
            let ports = try (0..<3).map { _ in try freeLoopbackPort() }
            let harness = harness
            metricsPorts = ports
            workerConfigs = try (0..<2).map { index in
                try harness.config(
                    ledger: ledger,
                    extra: common.merging(settings) { $1 }.merging(["metrics.listen": "127.0.0.1:\(ports[index])"]) {
                        $1
                    })
            }
            workers = try workerConfigs.map { try WorkerProcess(config: $0) }
            // The receiver needs only the broker (deploy/kubernetes/receiver.yaml): no ledger it could reach.
            let listen = try freeLoopbackPort()
            receiverURL = "http://127.0.0.1:\(listen)/notifications/apple"
            receiver = try WorkerProcess(
                config: try harness.config(
                    ledger: "postgresql://nobody@127.0.0.1:1/none",
                    extra: common.merging([
                        "notifications.listen": "127.0.0.1:\(listen)", "metrics.listen": "127.0.0.1:\(ports[2])",
                    ]) { $1 }),
                command: "receive")
            let receiverReady = HTTPRequest(url: "http://127.0.0.1:\(ports[2])/readyz")
            let ready = await eventually(timeout: .seconds(90)) {
                guard self.workers.allSatisfy({ $0.log.contains("partitions assigned") }) else { return false }
                return (try? await harness.http.execute(receiverReady))?.status == 200
            }
            #expect(ready, "not every process started:\n\(logs)")
            try await harness.admin.sendNotifications(to: receiverURL)
        }

        /// A purchase granted by a receipt job (verifyReceipt: no signed data, so no process meets the chain).
        func grantedPurchase(_ order: String, _ fields: [String: Any] = ["product_id": "coins"]) async throws -> String
        {
            let purchase = try await harness.admin.purchase(fields)
            let product = fields["product_id"] as? String ?? "coins"
            try await harness.submit([
                job("job-\(order)", order: order, product: product, ["receipt": purchase.receipt])
            ])
            let granted = await eventually(timeout: .seconds(60)) {
                self.harness.results["job-\(order)"]?.first?["decision"] as? String == "grant"
            }
            #expect(granted, "\(order) was not granted:\n\(logs)")
            return purchase.transactionID
        }

        /// `series`' value summed over the processes whose metrics ports are `ports` (the workers by default).
        func metric(_ series: String, on ports: [UInt16]? = nil) async -> Int {
            var total = 0
            for port in ports ?? Array(metricsPorts.prefix(2)) {
                guard let page = try? await harness.http.execute(HTTPRequest(url: "http://127.0.0.1:\(port)/metrics"))
                else { continue }
                for line in String(decoding: page.body, as: UTF8.self).split(separator: "\n")
                where line.hasPrefix(series + " ") {
                    total += Int(Double(line.split(separator: " ").last ?? "") ?? 0)
                }
            }
            return total
        }

        var logs: String {
            (workers + [receiver]).enumerated().map { "--- process \($0.offset):\n\($0.element.log.suffix(3000))" }
                .joined(separator: "\n")
        }

        /// The receiver down (a deploy gone wrong): Apple's deliveries fail from now on.
        func stopReceiver() async {
            guard receiverRunning.exchange(false, ordering: .relaxed) else { return }
            #expect(await receiver.stop(SIGTERM) == 0, "exit status after SIGTERM:\n\(receiver.log.suffix(2000))")
        }

        /// Both workers stopped: what the receiver takes waits on the topic.
        func stopWorkers() async {
            guard workersRunning.exchange(false, ordering: .relaxed) else { return }
            for process in workers {
                #expect(await process.stop(SIGTERM) == 0, "exit status after SIGTERM:\n\(process.log.suffix(2000))")
            }
        }

        func stop() async {
            await stopReceiver()
            await stopWorkers()
            await harness.stop()
        }
    }

    @Test(
        "refunds a separate receiver answered 200, processed by workers that never met the chain, and one found by the sweep: each revoked once, nothing dead-lettered"
    )
    func refundsReceivedElsewhere() async throws {
        let shape = try await Deployment(
            responders: [.root, .leaf],
            settings: ["notifications.sweep_interval_ms": "1000", "notifications.sweep_window_ms": "600000"])
        let orders = (0..<4).map { "refunded-\($0)" }
        var transactions: [String: String] = [:]
        for order in orders { transactions[order] = try await shape.grantedPurchase(order) }
        #expect(
            await shape.metric(#"receipt_worker_revocation_checks_total{outcome="good"}"#) == 0,
            "a worker met the chain before its first notification")
        for order in orders {
            _ = try await shape.harness.admin.notify("refund", ["transaction_id": try #require(transactions[order])])
        }
        // A refund Apple could not deliver (the receiver down): the workers' sweep finds it in Apple's history.
        await shape.stopReceiver()
        try await shape.harness.admin.sendNotifications(to: shape.receiverURL, retryDelaysMs: [])
        let swept = try await shape.grantedPurchase("swept")
        _ = try await shape.harness.admin.notify("refund", ["transaction_id": swept])
        let revoked = await eventually(timeout: .seconds(120)) {
            (orders + ["swept"]).allSatisfy { !shape.harness.events(order: $0, type: "receipt.revoked").isEmpty }
        }
        #expect(revoked, "not every refund was revoked:\n\(shape.logs)")
        for order in orders + ["swept"] {
            let ids = Set(
                shape.harness.events(order: order, type: "receipt.revoked").compactMap { $0["event_id"] as? String })
            #expect(ids.count == 1, "\(order): \(ids.count) revocations")
        }
        #expect(shape.harness.deadLetters.isEmpty, "dead-lettered: \(shape.harness.deadLetters.map { $0.headers })")
        // Each worker that handled a notification asked about the chain itself: it met it there first.
        #expect(await shape.metric(#"receipt_worker_revocation_checks_total{outcome="good"}"#) >= 1)
        // Each of the five is verified by the worker that processes it, or taken from that worker's own verification
        // of the same bytes: its sweep's, which, on a ledger that has handled no notification yet, reads Apple's
        // whole history and may meet a refund the receiver also delivered. Which way each goes is timing.
        let again = await shape.metric("receipt_worker_notifications_verified_again_total")
        let taken = await shape.metric("receipt_worker_notifications_taken_from_receiver_total")
        #expect(again + taken >= 5, "verified again: \(again), taken from this process's own: \(taken)")
        #expect(
            await shape.metric(#"receipt_worker_swept_notifications_total{app="default",found="failed_delivery"}"#) >= 1
        )
        await shape.stop()
    }

    @Test(
        "a refund the receiver answered 200 waits, never dead-lettered, while the worker meeting its chain first cannot ask the responder; revoked once it answers"
    )
    func refundWaitsForTheResponder() async throws {
        let shape = try await Deployment(responders: [.root, .leaf])
        let transaction = try await shape.grantedPurchase("refund-later")
        // No worker reads the topic while the receiver takes the refund (its responders answer it).
        await shape.stopWorkers()
        _ = try await shape.harness.admin.notify("refund", ["transaction_id": transaction])
        let accepted = #"receipt_worker_notifications_received_total{outcome="accepted",type="REFUND"}"#
        #expect(
            await eventually(timeout: .seconds(60)) { await shape.metric(accepted, on: [shape.metricsPorts[2]]) >= 1 },
            "the receiver did not accept the refund:\n\(shape.logs)")
        // A new worker, which never met the chain, while the leaf's responder is down: longer than its handlings
        // of a failure that may heal (retry.max_attempts) last. A group of its own (it reads the topics from their
        // start, every job answered from the ledger): the test broker can leave a group whose members all left
        // without an assignment for minutes.
        shape.pki.stop(.leaf)
        let config = try String(contentsOfFile: shape.workerConfigs[0], encoding: .utf8)
            .replacingOccurrences(of: "kafka.group.id=workers-", with: "kafka.group.id=late-workers-")
        let lateConfig = shape.workerConfigs[0] + ".late"
        try config.write(toFile: lateConfig, atomically: true, encoding: .utf8)
        let worker = try WorkerProcess(config: lateConfig)
        try await Task.sleep(for: .seconds(15))
        #expect(shape.harness.events(order: "refund-later", type: "receipt.revoked").isEmpty, "revoked on a guess")
        #expect(shape.harness.deadLetters.isEmpty, "dead-lettered: \(shape.harness.deadLetters.map { $0.headers })")
        try await shape.pki.start(.leaf)
        let revoked = await eventually(timeout: .seconds(90)) {
            !shape.harness.events(order: "refund-later", type: "receipt.revoked").isEmpty
        }
        #expect(revoked, "the refund was not revoked once the responder answered:\n\(worker.log.suffix(3000))")
        #expect(shape.harness.deadLetters.isEmpty, "dead-lettered: \(shape.harness.deadLetters.map { $0.headers })")
        #expect(await worker.stop(SIGTERM) == 0, "exit status after SIGTERM:\n\(worker.log.suffix(2000))")
        await shape.stop()
    }

    @Test(
        "a late subscription whose answer's chain cannot be asked about yet is asked again each round, and credited once the responder answers"
    )
    func statusCheckPending() async throws {
        // The leaf's responder is down: Apple's answer cannot be verified yet.
        let shape = try await Deployment(
            responders: [.root],
            settings: [
                "subscriptions.status_check_interval_ms": "1000", "subscriptions.status_check_after_ms": "0",
            ])
        let original = try await shape.grantedPurchase(
            "late-vip", ["product_id": "vip_monthly", "type": "subscription", "expires_in_seconds": 2])
        // Apple renews it and never says so.
        _ = try await shape.harness.admin.call(
            "renew", ["transaction_id": original, "period_seconds": 3_600, "notify": false])
        let pending = #"receipt_worker_subscription_status_checks_total{app="default",outcome="pending"}"#
        #expect(
            await eventually(timeout: .seconds(90)) { await shape.metric(pending) >= 2 },
            "not asked again after a pending answer:\n\(shape.logs)")
        #expect(shape.harness.events(order: "late-vip", type: "receipt.renewed").isEmpty, "credited on a guess")
        try await shape.pki.start(.leaf)
        let renewed = await eventually(timeout: .seconds(90)) {
            !shape.harness.events(order: "late-vip", type: "receipt.renewed").isEmpty
        }
        #expect(renewed, "the renewal was not credited once the responder answered:\n\(shape.logs)")
        let ids = Set(
            shape.harness.events(order: "late-vip", type: "receipt.renewed").compactMap { $0["event_id"] as? String })
        #expect(ids.count == 1)
        #expect(shape.harness.deadLetters.isEmpty)
        await shape.stop()
    }

    @Test(
        "a grant service's answer still retrying at Apple when the request falls due is never overridden by the policy"
    )
    func policyNeverOverAGrantService() async throws {
        let shape = try await Deployment(
            responders: [.root, .leaf], consumption: true,
            settings: [
                "apple.consumption.policy": "decline", "apple.consumption.terms_carry_consent": "true",
                // Apple gives 12 hours: due 30 seconds after the request, time for the grant service to answer first
                // (the notification through the receiver, Kafka, a worker and the test's reply, on a busy machine).
                "apple.consumption.margin_ms": "43170000", "consumption.policy_interval_ms": "1000",
            ])
        let transaction = try await shape.grantedPurchase("refund-asked")
        // Apple's Send Consumption Information fails until the request is past due.
        try await shape.harness.faults(["error_rate": 1.0, "error_status": 503])
        let requestedAt = Date()
        _ = try await shape.harness.admin.notify("consumption-request", ["transaction_id": transaction])
        let requested = await eventually(timeout: .seconds(60)) {
            !shape.harness.events(order: "refund-asked", type: "receipt.consumption_requested").isEmpty
        }
        #expect(requested, "\(shape.logs)")
        try await shape.harness.answerConsumption([
            "transaction_id": transaction, "customer_consented": true, "sample_content_provided": false,
            "refund_preference": "GRANT_PRORATED",
        ])
        // The scenario itself: Apple keeps refusing past the moment the request falls due, and a few policy rounds.
        let pastDue = await eventually(timeout: .seconds(60)) {
            let calls = (try? await shape.harness.admin.requestsByLane()["production.consumption"]) ?? 0
            return Date().timeIntervalSince(requestedAt) > 33 && calls >= 3
        }
        #expect(pastDue, "the grant service's answer is not retrying at Apple:\n\(shape.logs)")
        try await shape.harness.faults([:])
        let sent = await eventually(timeout: .seconds(60)) {
            ((try? await shape.harness.admin.consumptionAnswers()) ?? []).contains {
                $0["transaction_id"] as? String == transaction
            }
        }
        #expect(sent, "\(shape.logs)")
        let answers = try await shape.harness.admin.consumptionAnswers().filter {
            $0["transaction_id"] as? String == transaction
        }
        #expect(answers.count == 1, "\(answers)")
        #expect((answers.first?["body"] as? [String: Any])?["refundPreference"] as? String == "GRANT_PRORATED")
        #expect(
            await shape.metric(#"receipt_worker_consumption_policy_answers_total{answer="decline",app="default"}"#)
                == 0)
        await shape.stop()
    }
}
