import AppStoreSimulator
import Foundation
import HTTPClient
import ReceiptWorker
import TestSupport
import Testing
import Flows
import Messaging
import Observability

/// Two games in one worker (docs/contract.md section 10): each app's purchases verified with its own
/// credentials, routed by the job's `bundle_id`, and its own lane under Apple's rate limit.
@Suite("Many apps in one worker", .timeLimit(.minutes(3)))
struct ManyAppsEndToEndTests {
    static let second = "com.example.second"
    static let secondAppleID: Int64 = 2_222_222_222

    /// A harness whose worker knows the default app (com.example) and `apps.second`, which has its own shared
    /// secret and uses the default app's API key; the simulator sells for both.
    static func twoApps(parking: Bool = false, _ configure: @escaping (inout WorkerConfiguration) -> Void = { _ in })
        async throws -> WorkerHarness
    {
        let harness = try await WorkerHarness(notifications: true, parking: parking) { configuration in
            configuration.apple.transactionIDRequiresAccountToken = false
            var app = WorkerConfiguration.App(name: "second")
            app.bundleID = Self.second
            app.appAppleID = Self.secondAppleID
            app.sharedSecret = "second-secret"
            configuration.apps.append(app)
            configure(&configuration)
        }
        try await harness.admin.addApp([
            "bundle_id": Self.second, "app_apple_id": Self.secondAppleID, "shared_secret": "second-secret",
        ])
        return harness
    }

    @Test("each app's receipts, signed transactions and transaction ids are granted with its own credentials")
    func eachAppWithItsCredentials() async throws {
        let harness = try await Self.twoApps()
        let mine = try await harness.purchase(["product_id": "gems_100"])
        let theirs = try await harness.purchase(["product_id": "coins_5", "bundle_id": Self.second])
        let theirsToo = try await harness.purchase(["product_id": "coins_5", "bundle_id": Self.second])
        let theirsThree = try await harness.purchase(["product_id": "coins_5", "bundle_id": Self.second])
        try await harness.submit(job("a-receipt", order: "a-1", product: "gems_100", ["receipt": mine.receipt]))
        // The second app's receipt needs its own shared secret (the simulator answers 21004 to another's).
        try await harness.submit(
            job("b-receipt", order: "b-1", product: "coins_5", ["receipt": theirs.receipt, "bundle_id": Self.second]))
        try await harness.submit(
            job(
                "b-signed", order: "b-2", product: "coins_5",
                ["signed_transaction": theirsToo.signedTransaction, "bundle_id": Self.second]))
        // Get Transaction Info with a token whose bid is the second app's: the default app's would get a 404.
        try await harness.submit(
            job(
                "b-id", order: "b-3", product: "coins_5",
                ["transaction_id": theirsThree.transactionID, "bundle_id": Self.second]))
        for id in ["a-receipt", "b-receipt", "b-signed", "b-id"] {
            let result = await harness.result(jobID: id)
            #expect(result?["decision"] as? String == "grant", "\(id): \(result ?? [:])")
        }
        #expect(await harness.result(jobID: "a-receipt")?["bundle_id"] as? String == "com.example")
        #expect(await harness.result(jobID: "b-id")?["bundle_id"] as? String == Self.second)
        let metrics = harness.worker.metrics.registry.render()
        #expect(metrics.contains("app=\"second\""), "Apple's calls for the second app carry its name")
        await harness.stop()
    }

    @Test("a job naming one app with another app's purchase, or a bundle id no app has, is bundle_mismatch")
    func wrongApp() async throws {
        let harness = try await Self.twoApps()
        let mine = try await harness.purchase(["product_id": "gems_100"])
        let theirs = try await harness.purchase(["product_id": "coins_5", "bundle_id": Self.second])
        let theirsSigned = try await harness.purchase(["product_id": "coins_5", "bundle_id": Self.second])
        let requestsBefore = try await harness.admin.appleRequests()
        let cases: [(id: String, product: String, proof: [String: Any])] = [
            // No bundle_id: the default app; the signed transaction is the second app's.
            ("no-bundle", "coins_5", ["signed_transaction": theirs.signedTransaction]),
            // The second app named (its shared secret sent), the default app's receipt given: Apple's answer
            // names the default app.
            ("receipt-crossed", "gems_100", ["receipt": mine.receipt, "bundle_id": Self.second]),
            // The second app named, the default app's signed transaction given.
            ("crossed", "gems_100", ["signed_transaction": mine.signedTransaction, "bundle_id": Self.second]),
            // The default app named explicitly, the second app's signed transaction given.
            (
                "crossed-2", "coins_5",
                ["signed_transaction": theirsSigned.signedTransaction, "bundle_id": "com.example"]
            ),
            // A bundle id no app has: never sent to Apple with anyone's credentials.
            ("unknown", "gems_100", ["receipt": mine.receipt, "bundle_id": "com.example.other"]),
        ]
        for (id, product, proof) in cases {
            try await harness.submit(job(id, order: "order-\(id)", product: product, proof))
        }
        for (id, _, _) in cases {
            let result = await harness.result(jobID: id)
            #expect(result?["decision"] as? String == "deny", "\(id)")
            #expect(result?["reason"] as? String == "bundle_mismatch", "\(id): \(result?["detail"] ?? "")")
        }
        // One verifyReceipt call (receipt-crossed); signed transactions are checked locally; unknown calls nobody.
        #expect(try await harness.admin.appleRequests() - requestsBefore == 1)
        await harness.stop()
    }

    @Test("a 429 burst on one app's lane pauses that lane only: the other app's jobs go on at once")
    func lanesPerApp() async throws {
        // Apple (the simulator) allows 5 a second per app; the worker is told 50: the second app's burst meets
        // 429s and pauses its lane. Each 429 is an attempt: the budget is wide, the test is about the lanes.
        let harness = try await Self.twoApps { $0.retry.maxAttempts = 100 }
        try await harness.faults(["rate_limit_per_second": 5])
        var burst: [String] = []
        for _ in 0..<40 {
            burst.append(try await harness.purchase(["product_id": "coins_5", "bundle_id": Self.second]).transactionID)
        }
        var mine: [String] = []
        for _ in 0..<3 { mine.append(try await harness.purchase(["product_id": "gems_100"]).transactionID) }
        // Sent together: one by one, on a busy machine, the lane drained much of the burst while it was sent.
        try await harness.submit(
            together: burst.enumerated().map { index, id in
                job(
                    "b-\(index)", order: "b-\(index)", product: "coins_5",
                    ["transaction_id": id, "bundle_id": Self.second])
            })
        // Once the second app's lane has met Apple's limit, the default app's jobs come.
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.worker.metrics.registry.render().contains(
                    "receipt_worker_apple_lane_pauses_total{app=\"second\"")
            })
        let started = ContinuousClock.now
        try await harness.submit(
            together: mine.enumerated().map { index, id in
                job("a-\(index)", order: "a-\(index)", product: "gems_100", ["transaction_id": id])
            })
        for index in mine.indices {
            #expect(await harness.result(jobID: "a-\(index)")?["decision"] as? String == "grant")
        }
        let mineDone = ContinuousClock.now - started
        let all = await eventually(timeout: .seconds(60)) {
            burst.indices.allSatisfy { harness.results(jobID: "b-\($0)").first?["decision"] as? String == "grant" }
        }
        #expect(all, "every job of the paused lane is granted once Apple takes it")
        let burstDone = ContinuousClock.now - started
        // 40 at 5 a second take 8 s; the default app's 3 must not queue behind them.
        #expect(mineDone < burstDone, "the default app's jobs (\(mineDone)) finished before the burst (\(burstDone))")
        let metrics = harness.worker.metrics.registry.render()
        // The default app's lanes never paused: their counters (there from the start) read 0.
        #expect(
            metrics.split(separator: "\n").filter {
                $0.hasPrefix("receipt_worker_apple_lane_pauses_total{app=\"default\"")
            }
            .allSatisfy { $0.hasSuffix(" 0") })
        await harness.stop()
    }

    @Test(
        "the second app's refund notification is checked with its settings and revokes its grant; its refund request is answered with its token"
    )
    func notificationsPerApp() async throws {
        let harness = try await Self.twoApps()
        let purchase = try await harness.purchase(["product_id": "coins_5", "bundle_id": Self.second])
        let other = try await harness.purchase(["product_id": "coins_5", "bundle_id": Self.second])
        for (order, transaction) in [("b-refund", purchase), ("b-request", other)] {
            try await harness.submit(
                job(
                    order, order: order, product: "coins_5",
                    ["signed_transaction": transaction.signedTransaction, "bundle_id": Self.second]))
            #expect(await harness.result(jobID: order)?["decision"] as? String == "grant")
        }
        // Apple's notification names the second app (bundleId, appAppleId 2222222222): the default app's
        // verifier would refuse it.
        _ = try await harness.admin.notify("refund", ["transaction_id": purchase.transactionID])
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.events(orderID: "b-refund").contains { $0["type"] as? String == "receipt.revoked" }
            })
        // The refund request is answered with the second app's token: the simulator knows the transaction only
        // for the app it belongs to (another app's token gets 404, a dead letter).
        _ = try await harness.admin.notify(
            "consumption-request", ["transaction_id": other.transactionID, "reason": "UNINTENDED_PURCHASE"])
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.events(orderID: "b-request").contains {
                    $0["type"] as? String == "receipt.consumption_requested"
                }
            })
        try await harness.answerConsumption([
            "transaction_id": other.transactionID, "customer_consented": true, "sample_content_provided": false,
        ])
        #expect(await eventually(timeout: .seconds(60)) { (try? await harness.admin.consumptionAnswers().count) == 1 })
        #expect(harness.deadLetters.isEmpty)
        // An answer naming another app than the one the purchase was granted for is not sent with that key.
        try await harness.answerConsumption([
            "transaction_id": other.transactionID, "customer_consented": true, "sample_content_provided": false,
            "bundle_id": "com.example",
        ])
        #expect(await eventually(timeout: .seconds(60)) { harness.deadLetters.count == 1 })
        #expect(try await harness.admin.consumptionAnswers().count == 1)
        // A notification of a bundle id no app has is refused (400): an app the simulator knows, the worker not.
        try await harness.admin.addApp(["bundle_id": "com.example.third", "app_apple_id": 3_333])
        let stranger = try await harness.purchase(["product_id": "coins_5", "bundle_id": "com.example.third"])
        _ = try await harness.admin.notify("refund", ["transaction_id": stranger.transactionID])
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.worker.metrics.registry.render().contains(
                    "receipt_worker_notifications_received_total{outcome=\"rejected\",type=\"unverified\"}")
            })
        await harness.stop()
    }
}
