import AppStoreSimulator
@testable import Flows
import Foundation
import Observability
@testable import ReceiptWorker
import TestSupport
import Testing
import Vocabulary

/// Apple's history swept by the workers themselves: what Apple could not deliver while the receiver was down is
/// found and handled without anyone running a backfill, once, whichever replica sweeps.
@Suite("The sweep of Apple's notification history", .timeLimit(.minutes(3)))
struct NotificationSweepEndToEndTests {
    func events(_ harness: WorkerHarness, order: String, type: String) async -> [[String: Any]] {
        _ = await eventually(timeout: .seconds(60)) {
            !harness.events(orderID: order).filter { $0["type"] as? String == type }.isEmpty
        }
        return harness.events(orderID: order).filter { $0["type"] as? String == type }
    }

    @Test(
        "a receiver down for a window: two replicas, one sweeping, publish every refund and unclaimed purchase of it once"
    )
    func receiverDown() async throws {
        let harness = try await WorkerHarness(notifications: true) {
            $0.sweepInterval = .seconds(4)
            $0.sweepGap = .seconds(3_600)
            $0.unclaimedAfter = .seconds(2)
        }
        // A second replica of the same group, on the same ledger.
        let second = try await WorkerAssembly.make(harness.configuration, logger: WorkerHarness.logger)
        let secondRun = Task { try? await second.run() }
        var granted: [String: WorkerHarness.Purchase] = [:]
        for order in ["order-w1", "order-w2"] {
            let purchase = try await harness.purchase(["product_id": "gems_100"])
            try await harness.submit(
                job(
                    "job-\(order)", order: order, product: "gems_100",
                    ["signed_transaction": purchase.signedTransaction]))
            #expect(await harness.result(jobID: "job-\(order)")?["decision"] as? String == "grant")
            granted[order] = purchase
        }
        // The receiver is down: Apple cannot deliver the refunds, nor the purchase no job will claim.
        try await harness.admin.sendNotifications(to: "http://127.0.0.1:1/notifications/apple", retryDelaysMs: [])
        for purchase in granted.values {
            _ = try await harness.admin.notify("refund", ["transaction_id": purchase.transactionID])
        }
        let lost = try await harness.purchase(["product_id": "gems_500", "notify": true])

        for (order, purchase) in granted {
            let revoked = await events(harness, order: order, type: "receipt.revoked")
            #expect(revoked.first?["transaction_id"] as? String == purchase.transactionID, "\(order)")
        }
        let credit = await events(harness, order: "unclaimed:\(lost.transactionID)", type: "receipt.unclaimed")
        #expect(credit.first?["product_id"] as? String == "gems_500")
        // Rounds go on, on both replicas: nothing is published twice.
        let rounds = { (metrics: String) in
            metrics.split(separator: "\n").filter { $0.hasPrefix("receipt_worker_notification_sweeps_total") }
                .compactMap { Double($0.split(separator: " ").last ?? "") }.reduce(0, +)
        }
        _ = await eventually(timeout: .seconds(30)) {
            rounds(harness.worker.metrics.registry.render()) + rounds(second.metrics.registry.render()) >= 8
        }
        for order in granted.keys {
            #expect(harness.events(orderID: order).filter { $0["type"] as? String == "receipt.revoked" }.count == 1)
        }
        // One credit: its event may go out from both replicas' credit rounds (at least once, the same event id,
        // as the contract says events may repeat), never as a second credit.
        let credits = harness.events(orderID: "unclaimed:\(lost.transactionID)")
        #expect(Set(credits.compactMap { $0["event_id"] as? String }).count == 1, "\(credits)")
        #expect(credits.allSatisfy { $0["type"] as? String == "receipt.unclaimed" })
        // One replica swept at a time: the other found the lease held (the holder's rounds came late on a busy
        // machine, it may have passed to the other: never to both at once).
        let found = [harness.worker, second].map { worker in
            worker.metrics.registry.render().split(separator: "\n").first {
                $0.hasPrefix("receipt_worker_swept_notifications_total{app=\"default\",found=\"failed_delivery\"}")
            }.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
        }
        #expect(found.reduce(0, +) == 3, "\(found)")
        let elsewhere = [harness.worker, second].map {
            $0.metrics.registry.render().contains(
                "receipt_worker_notification_sweeps_total{app=\"default\",outcome=\"elsewhere\"} 0")
        }
        #expect(elsewhere.contains(false), "a replica found the lease held by the other")
        second.shutdown()
        await secondRun.value
        await harness.stop()
    }

    @Test(
        "a notification the sweep brought back is verified once: its replica's handler takes the sweep's verification")
    func sweptVerifiedOnce() async throws {
        let harness = try await WorkerHarness(notifications: true) {
            $0.sweepInterval = .seconds(2)
            $0.sweepGap = .seconds(3_600)
        }
        let purchase = try await harness.purchase(["product_id": "gems_100"])
        try await harness.submit(
            job(
                "job-once", order: "order-once", product: "gems_100", ["signed_transaction": purchase.signedTransaction]
            ))
        #expect(await harness.result(jobID: "job-once")?["decision"] as? String == "grant")
        // Apple cannot deliver: the refund reaches the topic only through the sweep, on this one replica.
        try await harness.admin.sendNotifications(to: "http://127.0.0.1:1/notifications/apple", retryDelaysMs: [])
        _ = try await harness.admin.notify("refund", ["transaction_id": purchase.transactionID])
        let revoked = await events(harness, order: "order-once", type: "receipt.revoked")
        #expect(revoked.first?["transaction_id"] as? String == purchase.transactionID)
        #expect(harness.metric("receipt_worker_notifications_taken_from_receiver_total") >= 1)
        #expect(harness.metric("receipt_worker_notifications_verified_again_total") == 0)
        await harness.stop()
    }

    @Test("a sweep's plan: the failures of the rolling window; after a silence, everything since")
    func plan() {
        let settings = NotificationSweeper.Settings(interval: .seconds(3_600), window: 86_400, gap: 21_600)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let heard = now.addingTimeInterval(-600)
        let quiet = NotificationSweeper.plan(now: now, newestHandled: heard, state: .init(), settings: settings)
        #expect(quiet.failures.start == now.addingTimeInterval(-86_400) && quiet.full == nil)
        let silent = NotificationSweeper.plan(
            now: now, newestHandled: now.addingTimeInterval(-30_000), state: .init(), settings: settings)
        #expect(silent.full?.start == now.addingTimeInterval(-30_000) && silent.full?.end == now)
        // Swept in full an hour ago: the silence is measured from there.
        let swept = NotificationSweeper.plan(
            now: now, newestHandled: now.addingTimeInterval(-30_000),
            state: .init(fullUntil: now.addingTimeInterval(-3_600)), settings: settings)
        #expect(swept.full == nil)
        // A full read of the Sandbox that stopped short: the Sandbox read again from its start, though its first
        // pages were handled since; Production, heard from, not read in full.
        let stopped = NotificationSweeper.State(
            fullUntil: now.addingTimeInterval(-3_600), unfinishedFrom: ["Sandbox": now.addingTimeInterval(-40_000)])
        let heardOf = NotificationSweeper.plan(
            now: now, newestHandled: now.addingTimeInterval(-60), state: stopped, settings: settings)
        let sandbox = NotificationSweeper.fullRead(of: .sandbox, plan: heardOf, state: stopped, now: now)
        #expect(sandbox?.start == now.addingTimeInterval(-40_000) && sandbox?.end == now)
        #expect(NotificationSweeper.fullRead(of: .production, plan: heardOf, state: stopped, now: now) == nil)
        // Never a notification: the window in full; never more than Apple keeps.
        let never = NotificationSweeper.plan(now: now, newestHandled: nil, state: .init(), settings: settings)
        #expect(never.full?.start == now.addingTimeInterval(-86_400))
        let long = NotificationSweeper.Settings(interval: .seconds(3_600), window: 400 * 86_400, gap: 21_600)
        let capped = NotificationSweeper.plan(now: now, newestHandled: nil, state: .init(), settings: long)
        #expect(capped.failures.start > now.addingTimeInterval(-180 * 86_400))
    }
}

/// Refund requests answered by an app's policy when no grant service does, never over one that does.
@Suite("Refund requests answered by policy", .timeLimit(.minutes(3)))
struct ConsumptionPolicyEndToEndTests {
    @Test(
        "a request nobody answers is answered by policy before its deadline; one a grant service answered is left alone"
    )
    func policy() async throws {
        let harness = try await WorkerHarness(notifications: true) {
            $0.defaultApp.consumptionPolicy.answer = .decline
            $0.defaultApp.consumptionPolicy.termsCarryConsent = true
            // Apple gives 12 hours: a margin of 12 hours less 10 seconds makes each request due 10 seconds after it
            // came, time enough for the grant service below to answer its own first.
            $0.defaultApp.consumptionPolicy.margin = .seconds(43_190)
            $0.consumptionPolicyInterval = .seconds(1)
        }
        var purchases: [String: WorkerHarness.Purchase] = [:]
        for order in ["order-answered", "order-silent"] {
            let purchase = try await harness.purchase(["product_id": "gems_100"])
            try await harness.submit(
                job(
                    "job-\(order)", order: order, product: "gems_100",
                    ["signed_transaction": purchase.signedTransaction]))
            #expect(await harness.result(jobID: "job-\(order)")?["decision"] as? String == "grant")
            purchases[order] = purchase
        }
        let answered = try #require(purchases["order-answered"])
        // The grant service answers its request at once.
        _ = try await harness.admin.notify("consumption-request", ["transaction_id": answered.transactionID])
        _ = await eventually(timeout: .seconds(30)) {
            harness.events(orderID: "order-answered").contains {
                $0["type"] as? String == "receipt.consumption_requested"
            }
        }
        try await harness.answerConsumption([
            "transaction_id": answered.transactionID, "customer_consented": true, "sample_content_provided": false,
            "refund_preference": "GRANT_FULL",
        ])
        // Nobody answers the other.
        let silent = try #require(purchases["order-silent"])
        _ = try await harness.admin.notify("consumption-request", ["transaction_id": silent.transactionID])
        let both = await eventually(timeout: .seconds(60)) {
            (try? await harness.admin.consumptionAnswers().count) ?? 0 >= 2
        }
        #expect(both)
        // A few rounds more: nothing else goes to Apple. Three more begun (the two between them ran to their end),
        // and every answer on the topic handled: the grant service's and each the policy put there.
        #expect(
            await harness.choreRounds(lease: "consumption-policy/default", count: 3), "no more rounds of the policy")
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.metric("receipt_worker_consumption_answers_total")
                    >= 1 + harness.metric("receipt_worker_consumption_policy_answers_total")
            }, "an answer on the topic was not handled")
        let answers = try await harness.admin.consumptionAnswers()
        let byTransaction = Dictionary(grouping: answers) { $0["transaction_id"] as? String ?? "" }
        #expect(byTransaction[answered.transactionID]?.count == 1)
        #expect(byTransaction[silent.transactionID]?.count == 1)
        let grantService = try #require(byTransaction[answered.transactionID]?.first?["body"] as? [String: Any])
        #expect(grantService["refundPreference"] as? String == "GRANT_FULL")
        let policy = try #require(byTransaction[silent.transactionID]?.first?["body"] as? [String: Any])
        #expect(policy["refundPreference"] as? String == "DECLINE" && policy["customerConsented"] as? Bool == true)
        // Delivery from the ledger: granted, not refunded.
        #expect(policy["deliveryStatus"] as? String == "DELIVERED")
        // Counted once per request it answered; a policy's answer put on the topic before the grant service's was
        // read (a busy machine) is not sent, and counted as superseded.
        let metrics = harness.worker.metrics.registry.render()
        func value(_ series: String) -> Int {
            metrics.split(separator: "\n").first { $0.hasPrefix(series + " ") }
                .flatMap { Int($0.split(separator: " ").last ?? "") } ?? -1
        }
        let produced = value("receipt_worker_consumption_policy_answers_total{answer=\"decline\",app=\"default\"}")
        let superseded = value("receipt_worker_consumption_answers_total{outcome=\"policy_superseded\"}")
        #expect(produced >= 1 && produced == 1 + superseded, "\(produced) produced, \(superseded) superseded")
        await harness.stop()
    }
}
