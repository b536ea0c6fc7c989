import AppStoreSimulator
import Foundation
import HTTPClient
import Kafka
import Observability
import ReceiptWorker
import TestSupport
import Testing
import Vocabulary
import Flows

/// A purchase's life after its grant, end to end: the simulator sends signed App Store Server Notifications
/// V2 over HTTP to the worker's receiver, the receiver produces them to a real broker, the worker turns them
/// into events and ledger changes, and answers refund requests with Send Consumption Information.
@Suite("After the grant: notifications, revocations, consumption answers", .timeLimit(.minutes(3)))
struct NotificationEndToEndTests {
    /// Grants `order` a new purchase of `product` (by signed transaction) and returns it.
    private func grant(
        _ harness: WorkerHarness, order: String, product: String = "gems_100", quantity: Int = 1,
        type: String = "consumable"
    ) async throws -> WorkerHarness.Purchase {
        let purchase = try await harness.purchase(["product_id": product, "quantity": quantity, "type": type])
        try await harness.submit(
            job(
                "job-\(order)", order: order, product: product, ["signed_transaction": purchase.signedTransaction],
                quantity: quantity))
        let result = await harness.result(jobID: "job-\(order)")
        #expect(result?["decision"] as? String == "grant", "\(String(describing: result))")
        return purchase
    }

    private func events(_ harness: WorkerHarness, order: String, type: String, count: Int = 1) async
        -> [[String: Any]]
    {
        _ = await eventually(timeout: .seconds(60)) {
            harness.events(orderID: order).filter { $0["type"] as? String == type }.count >= count
        }
        return harness.events(orderID: order).filter { $0["type"] as? String == type }
    }

    @Test(
        "grant, then a refund: receipt.revoked for the granted order with Apple's revocation; the same purchase presented again is denied revoked"
    )
    func refund() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let purchase = try await grant(harness, order: "order-r")
        let uuid = try await harness.admin.notify("refund", ["transaction_id": purchase.transactionID, "reason": 1])
        let revoked = try #require(await events(harness, order: "order-r", type: "receipt.revoked").first)
        #expect(revoked["user_id"] as? String == "player-1")
        #expect(revoked["product_id"] as? String == "gems_100" && revoked["quantity"] as? Int == 1)
        #expect(revoked["transaction_id"] as? String == purchase.transactionID)
        #expect(revoked["revocation_type"] as? String == "REFUND_FULL")
        #expect(revoked["revocation_percentage"] as? Int == 100)
        #expect(revoked["revocation_reason"] as? Int == 1)
        #expect(revoked["notification_id"] as? String == uuid)
        #expect(revoked["revocation_date"] is String && revoked["environment"] as? String == "Production")
        // The notification is on its topic as received, keyed by the original transaction, with its headers.
        let record = try #require(harness.notificationRecords.first)
        #expect(record.header("notification_type")?.stringValue == "REFUND")
        #expect(record.header("notification_uuid")?.stringValue == uuid)
        #expect(record.key.map { String(decoding: $0, as: UTF8.self) } == purchase.transactionID)
        let sent = try await harness.admin.notifications().first { $0["notification_uuid"] as? String == uuid }
        #expect(sent?["delivered"] as? Bool == true)
        // Received and processed by this one worker: processed from its receiver's verification, never verified
        // twice (the worker's receiver and processor share what was verified).
        let metrics = harness.worker.metrics.registry.render()
        func value(_ name: String) -> Int? {
            metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }
                .flatMap { Int($0.split(separator: " ").last ?? "") }
        }
        #expect(value("receipt_worker_notifications_taken_from_receiver_total").map { $0 >= 1 } == true, "\(metrics)")
        #expect(value("receipt_worker_notifications_verified_again_total") == 0, "\(metrics)")
        // The pre-refund signed transaction again, in a new job for the same order: revoked, not granted.
        try await harness.submit(
            job("job-again", order: "order-r", product: "gems_100", ["signed_transaction": purchase.signedTransaction]))
        let again = await harness.result(jobID: "job-again")
        #expect(again?["decision"] as? String == "deny" && again?["reason"] as? String == "revoked")
        await harness.stop()
    }

    @Test("a partial refund of a quantity-3 purchase says which share was refunded; a reversal reinstates it")
    func partialRefundAndReversal() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let purchase = try await grant(harness, order: "order-p", quantity: 3)
        _ = try await harness.admin.notify(
            "refund", ["transaction_id": purchase.transactionID, "percentage": 33.333])
        let revoked = try #require(await events(harness, order: "order-p", type: "receipt.revoked").first)
        #expect(revoked["quantity"] as? Int == 3)
        #expect(revoked["revocation_type"] as? String == "REFUND_PRORATED")
        #expect((revoked["revocation_percentage"] as? Double).map { abs($0 - 33.333) < 0.0005 } == true)
        _ = try await harness.admin.notify("reverse-refund", ["transaction_id": purchase.transactionID])
        let reinstated = try #require(await events(harness, order: "order-p", type: "receipt.reinstated").first)
        #expect(reinstated["transaction_id"] as? String == purchase.transactionID)
        #expect(reinstated["revocation_type"] == nil)  // no revocation fields on a reinstatement
        // Granted again in the ledger: the same order presenting it is the same grant.
        try await harness.submit(
            job(
                "job-p2", order: "order-p", product: "gems_100", ["signed_transaction": purchase.signedTransaction],
                quantity: 3))
        #expect(await harness.result(jobID: "job-p2")?["decision"] as? String == "grant")
        await harness.stop()
    }

    @Test(
        "the same notification delivered twice publishes one event id; a restart mid-way loses nothing and duplicates no id"
    )
    func sameNotificationTwice() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let purchase = try await grant(harness, order: "order-d")
        let uuid = try await harness.admin.notify("revoke", ["transaction_id": purchase.transactionID])
        _ = await events(harness, order: "order-d", type: "receipt.revoked")
        // Apple sends it again (its retry, or a backfill): the receiver takes it, processing repeats the event.
        let signed = try #require(
            try await harness.admin.notifications().first { $0["notification_uuid"] as? String == uuid }?[
                "signed_payload"] as? String)
        let port = try #require(harness.receiver?.port)
        let body = try JSONSerialization.data(withJSONObject: ["signedPayload": signed])
        let answer = try await harness.http.execute(
            HTTPRequest(method: .post, url: "http://127.0.0.1:\(port)/notifications/apple", body: body))
        #expect(answer.status == 200)
        try await harness.restartWorker()
        let all = await events(harness, order: "order-d", type: "receipt.revoked", count: 2)
        #expect(all.count >= 2)
        #expect(Set(all.compactMap { $0["event_id"] as? String }).count == 1)
        #expect(all.first?["revocation_type"] as? String == "FAMILY_REVOKE")
        await harness.stop()
    }

    @Test("a refund that arrives before any grant is remembered: the purchase presented afterwards is denied revoked")
    func refundBeforeGrant() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let purchase = try await harness.purchase(["product_id": "gems_100"])
        _ = try await harness.admin.notify("refund", ["transaction_id": purchase.transactionID])
        _ = await eventually(timeout: .seconds(60)) {
            harness.worker.metrics.registry.render().contains(
                "receipt_worker_notifications_processed_total{outcome=\"not_granted\",type=\"REFUND\"} 1")
        }
        // The player kept the signed transaction from before the refund, and presents it now.
        try await harness.submit(
            job(
                "job-late", order: "order-late", product: "gems_100", ["signed_transaction": purchase.signedTransaction]
            ))
        let result = await harness.result(jobID: "job-late")
        #expect(result?["decision"] as? String == "deny" && result?["reason"] as? String == "revoked")
        await harness.stop()
    }

    @Test(
        "a refund delivered after the reversal that undid it changes nothing; a second refund publishes no second event"
    )
    func outOfOrderAndRepeatedRefunds() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let first = try await grant(harness, order: "order-o")
        let url = "http://127.0.0.1:\(try #require(harness.receiver?.port))/notifications/apple"
        // Apple refunds, then reverses; the receiver gets them the other way round (a retry after an outage).
        try await harness.admin.sendNotifications(to: "http://127.0.0.1:1/notifications/apple", retryDelaysMs: [])
        let refund = try await harness.admin.notify("refund", ["transaction_id": first.transactionID])
        // Signed a millisecond later at least (Apple's dates are in milliseconds): the reversal is the newer.
        let signed = Date()
        _ = await eventually(interval: .milliseconds(1)) { Date().timeIntervalSince(signed) > 0.001 }
        let reversal = try await harness.admin.notify("reverse-refund", ["transaction_id": first.transactionID])
        let sent = try await harness.admin.notifications()
        func body(_ uuid: String) throws -> Data {
            let signed = try #require(
                sent.first { $0["notification_uuid"] as? String == uuid }?["signed_payload"] as? String)
            return try JSONSerialization.data(withJSONObject: ["signedPayload": signed])
        }
        // Processed in this order: the reversal, then the refund.
        for (uuid, type) in [(reversal, "\"REFUND_REVERSED\""), (refund, "\"REFUND\"")] {
            let answer = try await harness.http.execute(HTTPRequest(method: .post, url: url, body: try body(uuid)))
            #expect(answer.status == 200)
            #expect(
                await eventually(timeout: .seconds(60)) {
                    harness.metric("receipt_worker_notifications_processed_total", "type=\(type)") >= 1
                }, "\(type) not processed")
        }
        _ = await eventually(timeout: .seconds(60)) {
            harness.worker.metrics.registry.render().contains(
                "receipt_worker_notifications_processed_total{outcome=\"ignored\",type=\"REFUND\"} 1")
        }
        #expect(harness.events(orderID: "order-o").filter { $0["type"] as? String == "receipt.revoked" }.isEmpty)
        try await harness.submit(
            job("job-o2", order: "order-o", product: "gems_100", ["signed_transaction": first.signedTransaction]))
        #expect(await harness.result(jobID: "job-o2")?["decision"] as? String == "grant")
        // Another purchase refunded, then refunded again: one receipt.revoked.
        try await harness.admin.sendNotifications(to: url)
        let second = try await grant(harness, order: "order-o3")
        _ = try await harness.admin.notify("refund", ["transaction_id": second.transactionID])
        _ = await events(harness, order: "order-o3", type: "receipt.revoked")
        _ = try await harness.admin.notify("refund", ["transaction_id": second.transactionID, "percentage": 100])
        _ = await eventually(timeout: .seconds(60)) {
            harness.worker.metrics.registry.render().contains(
                "receipt_worker_notifications_processed_total{outcome=\"ignored\",type=\"REFUND\"} 2")
        }
        #expect(harness.events(orderID: "order-o3").filter { $0["type"] as? String == "receipt.revoked" }.count == 1)
        await harness.stop()
    }

    @Test("a forged, a wrong-app and a not-a-notification body are answered 400 and nothing is produced")
    func forged() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let port = try #require(harness.receiver?.port)
        let url = "http://127.0.0.1:\(port)/notifications/apple"
        // Another app's purchase: signed by the (test) chain, but not for this bundle id.
        let other = try await harness.purchase(["product_id": "p", "bundle_id": "com.other.game"])
        let uuid = try await harness.admin.notify("refund", ["transaction_id": other.transactionID])
        _ = await eventually(timeout: .seconds(60)) {
            let sent = try? await harness.admin.notifications().first { $0["notification_uuid"] as? String == uuid }
            return (sent?["attempts"] as? [[String: Any]] ?? []).contains { $0["status"] as? Int == 400 }
        }
        // Every attempt the receiver answered was a 400 (on a loaded machine one may time out on the
        // simulator's side first, recorded without a status).
        let statuses =
            (try await harness.admin.notifications().first { $0["notification_uuid"] as? String == uuid }?[
                "attempts"] as? [[String: Any]] ?? []).compactMap { $0["status"] as? Int }
        #expect(!statuses.isEmpty && statuses.allSatisfy { $0 == 400 }, "\(statuses)")
        // A payload re-signed by someone else: the signature does not verify.
        let signed = try #require(
            try await harness.admin.notifications().first?["signed_payload"] as? String)
        let parts = signed.split(separator: ".")
        let forged = "\(parts[0]).\(parts[1]).\(String(parts[2].reversed()))"
        for body in [
            try JSONSerialization.data(withJSONObject: ["signedPayload": forged]),
            Data("{\"signedPayload\": 7}".utf8), Data("not json".utf8), Data(),
        ] {
            let answer = try await harness.http.execute(HTTPRequest(method: .post, url: url, body: body))
            #expect(answer.status == 400)
        }
        let get = try await harness.http.execute(HTTPRequest(url: url))
        #expect(get.status == 405)
        // Nothing on the topic: the receiver produces before it answers, so what it produced is there by now.
        #expect(try await harness.notificationsProduced() == 0)
        #expect(harness.notificationRecords.isEmpty)
        // Four bodies, and the other app's notification once per attempt (Apple, and the simulator, retry a 400).
        let line = harness.worker.metrics.registry.render().split(separator: "\n").first {
            $0.hasPrefix("receipt_worker_notifications_received_total{outcome=\"rejected\",type=\"unverified\"} ")
        }
        #expect(
            line.flatMap { Int($0.split(separator: " ").last ?? "") }.map { $0 >= 5 } == true,
            "\(String(describing: line))")
        await harness.stop()
    }

    @Test("a Sandbox notification where sandbox is not allowed is answered 200 and dropped")
    func sandboxDropped() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let purchase = try await harness.purchase(["product_id": "p", "environment": "Sandbox"])
        let uuid = try await harness.admin.notify("refund", ["transaction_id": purchase.transactionID])
        _ = await eventually(timeout: .seconds(60)) {
            let sent = try? await harness.admin.notifications().first { $0["notification_uuid"] as? String == uuid }
            return sent?["delivered"] as? Bool == true
        }
        let sent = try await harness.admin.notifications().first { $0["notification_uuid"] as? String == uuid }
        // Every answer the receiver gave was 200 (an attempt that timed out on the simulator's side, on a
        // loaded machine, has no status, and the receiver may still have counted it: one drop or two).
        let statuses = ((sent?["attempts"] as? [[String: Any]]) ?? []).compactMap { $0["status"] as? Int }
        #expect(!statuses.isEmpty && statuses.allSatisfy { $0 == 200 }, "\(statuses)")
        // Nothing on the topic: the receiver produces before it answers, so what it produced is there by now.
        #expect(try await harness.notificationsProduced() == 0)
        #expect(harness.notificationRecords.isEmpty)
        #expect(
            harness.worker.metrics.registry.render().contains(
                "receipt_worker_notifications_received_total{outcome=\"sandbox_dropped\",type=\"REFUND\"} "))
        await harness.stop()
    }

    @Test(
        "the broker does not take the notification: 503, and the simulator's retry lands once it does; nothing is lost")
    func brokerUnavailable() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let purchase = try await grant(harness, order: "order-b")
        // The receiver's broker goes away: a worker whose producer reaches no broker answers for it.
        var unreachable = harness.configuration
        unreachable.kafka["bootstrap.servers"] = "127.0.0.1:1"
        unreachable.kafka["message.timeout.ms"] = "3000"
        let live = harness.swapReceiverWorker(try await WorkerAssembly.make(unreachable, logger: WorkerHarness.logger))
        // Retries for about a minute: a loaded machine may take seconds to acknowledge once the broker is back.
        try await harness.admin.sendNotifications(
            to: "http://127.0.0.1:\(try #require(harness.receiver?.port))/notifications/apple",
            retryDelaysMs: [300, 600, 1200, 2400, 4800, 8000, 8000, 8000, 8000, 8000, 8000])
        let uuid = try await harness.admin.notify("refund", ["transaction_id": purchase.transactionID])
        _ = await eventually(timeout: .seconds(60)) {
            let sent = try? await harness.admin.notifications().first { $0["notification_uuid"] as? String == uuid }
            return (sent?["attempts"] as? [[String: Any]])?.first?["status"] as? Int == 503
        }
        _ = harness.swapReceiverWorker(live)  // the broker is back
        _ = await eventually(timeout: .seconds(90)) {
            let sent = try? await harness.admin.notifications().first { $0["notification_uuid"] as? String == uuid }
            return sent?["delivered"] as? Bool == true
        }
        let revoked = await events(harness, order: "order-b", type: "receipt.revoked")
        #expect(revoked.first?["notification_id"] as? String == uuid)
        let sent = try await harness.admin.notifications().first { $0["notification_uuid"] as? String == uuid }
        let statuses = (sent?["attempts"] as? [[String: Any]] ?? []).compactMap { $0["status"] as? Int }
        #expect(statuses.first == 503 && statuses.last == 200, "\(statuses)")
        #expect(
            harness.worker.metrics.registry.render().contains(
                "receipt_worker_notifications_received_total{outcome=\"unavailable\",type=\"REFUND\"}"))
        await harness.stop()
    }

    @Test(
        "a refund request: receipt.consumption_requested with respond_by; the grant service's answer reaches Apple with the right body; no consent sends nothing"
    )
    func consumptionRequest() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let purchase = try await grant(harness, order: "order-c")
        let uuid = try await harness.admin.notify(
            "consumption-request", ["transaction_id": purchase.transactionID, "reason": "UNINTENDED_PURCHASE"])
        let request = try #require(
            await events(harness, order: "order-c", type: "receipt.consumption_requested").first)
        #expect(request["notification_id"] as? String == uuid)
        #expect(request["consumption_request_reason"] as? String == "UNINTENDED_PURCHASE")
        let notified = try #require((request["notified_at"] as? String).flatMap(parseTime))
        let respondBy = try #require((request["respond_by"] as? String).flatMap(parseTime))
        #expect(abs(respondBy.timeIntervalSince(notified) - 12 * 3600) < 0.01)
        // No consent: nothing is sent (Apple would refuse it), nothing dead-lettered.
        try await harness.answerConsumption([
            "transaction_id": purchase.transactionID, "customer_consented": false, "sample_content_provided": false,
        ])
        // With consent, delivery status defaulted from the ledger (granted, not revoked: DELIVERED).
        try await harness.answerConsumption([
            "transaction_id": purchase.transactionID, "customer_consented": true, "sample_content_provided": true,
            "consumption_percentage": 25.5, "refund_preference": "GRANT_PRORATED",
        ])
        _ = await eventually(timeout: .seconds(60)) {
            (try? await harness.admin.consumptionAnswers().count) == 1
        }
        let answers = try await harness.admin.consumptionAnswers()
        #expect(answers.count == 1)
        let body = try #require(answers.first?["body"] as? [String: Any])
        #expect(answers.first?["transaction_id"] as? String == purchase.transactionID)
        #expect(body["customerConsented"] as? Bool == true && body["sampleContentProvided"] as? Bool == true)
        #expect(body["deliveryStatus"] as? String == "DELIVERED")
        #expect(body["consumptionPercentage"] as? Int == 25500)
        #expect(body["refundPreference"] as? String == "GRANT_PRORATED")
        // Counted once Apple's answer is back, which may be a moment after the simulator kept the body.
        let counted = await eventually(timeout: .seconds(10)) {
            let metrics = harness.worker.metrics.registry.render()
            return metrics.contains("\nreceipt_worker_consumption_answers_total{outcome=\"no_consent\"} 1\n")
                && metrics.contains("\nreceipt_worker_consumption_answers_total{outcome=\"sent\"} 1\n")
        }
        #expect(counted, "\(harness.worker.metrics.registry.render())")
        #expect(harness.deadLetters.isEmpty)
        await harness.stop()
    }

    @Test("a consumption answer Apple refuses, or a malformed one, goes to the DLQ as consumption_not_sent")
    func consumptionRefused() async throws {
        let harness = try await WorkerHarness(notifications: true)
        // Apple knows no such transaction: 404, refused for good.
        try await harness.answerConsumption([
            "transaction_id": "999999999", "customer_consented": true, "sample_content_provided": false,
        ])
        try await harness.answerConsumption(["transaction_id": "12", "customer_consented": "yes"])
        _ = await eventually(timeout: .seconds(60)) { harness.deadLetters.count >= 2 }
        let reasons = harness.deadLetters.map { $0.header("dlq_reason")?.stringValue }
        #expect(reasons == ["consumption_not_sent", "consumption_not_sent"], "\(reasons)")
        await harness.stop()
    }

    @Test(
        "backfill after the receiver was down: every missed refund produces its event exactly once, however often it runs"
    )
    func backfill() async throws {
        let harness = try await WorkerHarness(notifications: true)
        var purchases: [String: WorkerHarness.Purchase] = [:]
        for order in ["order-b1", "order-b2", "order-b3"] {
            purchases[order] = try await grant(harness, order: order)
        }
        // The receiver is down: Apple's deliveries fail (no retries left here), the refunds are missed.
        try await harness.admin.sendNotifications(to: "http://127.0.0.1:1/notifications/apple", retryDelaysMs: [])
        var missed: [String] = []
        for purchase in purchases.values {
            missed.append(try await harness.admin.notify("refund", ["transaction_id": purchase.transactionID]))
        }
        // Apple tried each once and gave up (no retries left): nothing reached the receiver, nothing is on the topic.
        #expect(
            await eventually(timeout: .seconds(60)) {
                let sent = (try? await harness.admin.notifications()) ?? []
                return missed.allSatisfy { uuid in
                    (sent.first { $0["notification_uuid"] as? String == uuid }?["attempts"] as? [Any])?.count == 1
                }
            }, "Apple's attempts were not all made")
        #expect(try await harness.notificationsProduced() == 0)
        #expect(harness.notificationRecords.isEmpty)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("root-\(UUID()).pem").path
        try AppStoreSimulator.testRootPEM.write(toFile: root, atomically: true, encoding: .utf8)
        let key = MetricsEndpointTests.repositoryRoot.appendingPathComponent("Tests/AppleClientTests/testSigningKey.p8")
        let settings = [
            "kafka.bootstrap.servers=\(WorkerHarness.bootstrap)",
            "topics.notifications=\(harness.topics.notifications)",
            "apple.bundle_id=com.example", "apple.app_apple_id=\(harness.configuration.defaultApp.appAppleID ?? 0)",
            "apple.api.key_id=keyId", "apple.api.issuer_id=issuerId", "apple.api.private_key_file=\(key.path)",
            "apple.api.production_url=\(harness.simulator.baseURL)/production",
            "apple.api.sandbox_url=\(harness.simulator.baseURL)/sandbox", "apple.allow_insecure_urls=true",
            "apple.root_certificates=\(root)",
        ].flatMap { ["--set", $0] }
        let since = ["--since", RFC3339.format(Date(timeIntervalSinceNow: -3600))]
        let dryRun = try await CommandLineRun.run(["notifications", "backfill"] + since + ["--dry-run"] + settings)
        #expect(dryRun.status == 0, "\(dryRun.errors)")
        #expect(dryRun.output.contains("Production: 3 notification(s) read, 0 produced (dry run)"), "\(dryRun.output)")
        #expect(dryRun.output.contains("  REFUND: 3"))
        for _ in 0..<2 {
            let run = try await CommandLineRun.run(["notifications", "backfill"] + since + settings)
            #expect(run.status == 0, "\(run.errors)")
            #expect(run.output.contains("Production: 3 notification(s) read, 3 produced"), "\(run.output)")
        }
        for (order, purchase) in purchases {
            let revoked = await events(harness, order: order, type: "receipt.revoked", count: 2)
            #expect(revoked.first?["transaction_id"] as? String == purchase.transactionID)
            #expect(Set(revoked.compactMap { $0["event_id"] as? String }).count == 1, "\(order): one event id")
        }
        let usage = try await CommandLineRun.run(["notifications", "backfill"] + settings)
        #expect(usage.status == 2 && usage.errors.contains("--since"))
        let tooOld = try await CommandLineRun.run(
            ["notifications", "backfill", "--since", "2020-01-01T00:00:00Z"] + settings)
        #expect(tooOld.status == 2 && tooOld.errors.contains("180 days"))
        await harness.stop()
    }

    private func parseTime(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
