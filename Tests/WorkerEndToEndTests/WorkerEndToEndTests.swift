import Foundation
import Kafka
import TestSupport
import Testing
import Configuration

@Suite("The worker end to end: broker, simulator over HTTP, ledger", .timeLimit(.minutes(3)))
struct WorkerEndToEndTests {
    @Test("a genuine purchase is granted, with CloudEvents headers; the same job again repeats its event id")
    func grantAndRedelivery() async throws {
        let harness = try await WorkerHarness()
        let purchase = try await harness.purchase(["product_id": "coins.1000", "quantity": 1])
        try await harness.submit(job("j-grant", order: "order-1", product: "coins.1000", ["receipt": purchase.receipt]))
        let event = try #require(await harness.result(jobID: "j-grant"))
        #expect(event["decision"] as? String == "grant")
        #expect(event["reason"] as? String == "verified")
        #expect(event["transaction_id"] as? String == purchase.transactionID)
        #expect(event["environment"] as? String == "Production")
        #expect((event["attempts"] as? Int ?? 0) >= 1)
        let message = try #require(harness.resultMessages(jobID: "j-grant").first)
        #expect(message.key == Array("order-1".utf8))
        #expect(message.header("ce_type")?.stringValue == "receipt.granted")
        #expect(message.header("ce_id")?.stringValue == event["event_id"] as? String)
        #expect(message.header("ce_specversion")?.stringValue == "1.0")

        try await harness.submit(job("j-grant", order: "order-1", product: "coins.1000", ["receipt": purchase.receipt]))
        #expect(await eventually { harness.results(jobID: "j-grant").count == 2 })
        let ids = Set(harness.results(jobID: "j-grant").compactMap { $0["event_id"] as? String })
        #expect(ids.count == 1)
        await harness.stop()
    }

    @Test(
        "one receipt replayed for a second order is duplicate_transaction; a cheap product's receipt is product_mismatch"
    )
    func replayAndSwap() async throws {
        let harness = try await WorkerHarness()
        let cheap = try await harness.purchase(["product_id": "coins.100"])
        try await harness.submit(job("j-first", order: "order-a", product: "coins.100", ["receipt": cheap.receipt]))
        #expect(await harness.result(jobID: "j-first")?["decision"] as? String == "grant")
        try await harness.submit(job("j-replay", order: "order-b", product: "coins.100", ["receipt": cheap.receipt]))
        #expect(await harness.result(jobID: "j-replay")?["reason"] as? String == "duplicate_transaction")
        try await harness.submit(
            job(
                "j-swap", order: "order-c", product: "coins.10000",
                ["receipt": cheap.receipt, "transaction_id": cheap.transactionID]))
        #expect(await harness.result(jobID: "j-swap")?["reason"] as? String == "product_mismatch")
        await harness.stop()
    }

    @Test("sandbox purchases are denied unless allowed", arguments: [false, true])
    func sandbox(allowed: Bool) async throws {
        let harness = try await WorkerHarness(allowSandbox: allowed)
        let first = try await harness.purchase(["product_id": "coins.100", "environment": "Sandbox"])
        let second = try await harness.purchase(["product_id": "coins.100", "environment": "Sandbox"])
        try await harness.submit(job("j-receipt", order: "o-1", product: "coins.100", ["receipt": first.receipt]))
        try await harness.submit(
            job("j-signed", order: "o-2", product: "coins.100", ["signed_transaction": second.signedTransaction]))
        let viaReceipt = await harness.result(jobID: "j-receipt")
        let viaSigned = await harness.result(jobID: "j-signed")
        #expect(viaReceipt?["reason"] as? String == (allowed ? "verified" : "sandbox_not_allowed"))
        #expect(viaSigned?["reason"] as? String == (allowed ? "verified" : "sandbox_not_allowed"))
        if allowed {
            #expect(viaReceipt?["environment"] as? String == "Sandbox")
            // The 21007 redirect costs a second call.
            #expect(viaReceipt?["attempts"] as? Int == 2)
        }
        await harness.stop()
    }

    @Test(
        "malformed messages go to the DLQ unchanged with their headers, an invalid job is also denied, the worker goes on"
    )
    func malformed() async throws {
        let harness = try await WorkerHarness()
        try await harness.submit(raw: Data("definitely not json".utf8), key: "k1")
        try await harness.submit(
            raw: Data(
                #"{"job_id":"j-bad","order_id":"o-bad","user_id":"u","product_id":"p","quantity":0,"receipt":"QUJD"}"#
                    .utf8), key: "o-bad")
        try await harness.submit(
            raw: Data(#"{"job_id":"x","order_id":"o-big","pad":"\#(String(repeating: "x", count: 300_000))"}"#.utf8),
            key: "o-big")
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        try await harness.submit(job("j-after", order: "o-after", product: "coins.100", ["receipt": purchase.receipt]))

        #expect(await harness.result(jobID: "j-after")?["decision"] as? String == "grant")
        #expect(await harness.result(jobID: "j-bad")?["reason"] as? String == "malformed_job")
        #expect(await eventually { harness.deadLetters.count == 3 })
        let letters = harness.deadLetters
        let notJSON = try #require(letters.first { $0.key == Array("k1".utf8) })
        #expect(notJSON.value == Array("definitely not json".utf8))
        #expect(notJSON.header("dlq_reason")?.stringValue == "malformed_job")
        #expect(notJSON.header("dlq_source_topic")?.stringValue == harness.topics.jobs)
        #expect(notJSON.header("dlq_source_offset") != nil && notJSON.header("dlq_source_partition") != nil)
        #expect(notJSON.header("dlq_attempts")?.stringValue == "0")
        #expect(letters.contains { $0.header("dlq_error")?.stringValue?.contains("jobs.max_bytes") == true })
        #expect(letters.contains { $0.header("dlq_error")?.stringValue?.contains("quantity") == true })
        await harness.stop()
    }

    @Test("during an Apple outage (5xx then 21005) nothing is denied; every job is granted after recovery")
    func outage() async throws {
        let harness = try await WorkerHarness(maxAttempts: 100)
        var purchases: [WorkerHarness.Purchase] = []
        for index in 0..<10 { purchases.append(try await harness.purchase(["product_id": "coins.\(index)"])) }
        try await harness.faults(["outage_start_in_ms": 0, "outage_seconds": 3, "outage_mode": "http_5xx"])
        for (index, purchase) in purchases.enumerated() {
            try await harness.submit(
                job("j-\(index)", order: "o-\(index)", product: "coins.\(index)", ["receipt": purchase.receipt]))
        }
        let allGranted = await eventually(timeout: .seconds(60)) {
            (0..<10).allSatisfy { harness.results(jobID: "j-\($0)").first?["decision"] as? String == "grant" }
        }
        #expect(allGranted)
        #expect(
            (0..<10).allSatisfy { index in
                harness.results(jobID: "j-\(index)").allSatisfy { $0["decision"] as? String == "grant" }
            })
        #expect(harness.deadLetters.isEmpty)
        await harness.stop()
    }

    @Test("retries exhausted: the job goes to the DLQ with retries_exhausted and its attempts, never to a deny")
    func retriesExhausted() async throws {
        let harness = try await WorkerHarness(maxAttempts: 3)
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        try await harness.faults(["status_21005_rate": 1.0])
        try await harness.submit(
            job("j-doomed", order: "o-doomed", product: "coins.100", ["receipt": purchase.receipt]))
        #expect(await eventually(timeout: .seconds(60)) { !harness.deadLetters.isEmpty })
        let letter = try #require(harness.deadLetters.first)
        #expect(letter.header("dlq_reason")?.stringValue == "retries_exhausted")
        #expect(letter.header("dlq_attempts")?.stringValue == "3")
        #expect(harness.results(jobID: "j-doomed").isEmpty)
        #expect(letter.header("dlq_error")?.stringValue?.contains(purchase.receipt) == false)
        await harness.stop()
    }

    @Test(
        "a restored purchase (new transaction id on another device) is duplicate_transaction for a second order",
        arguments: ["non_consumable", "subscription"], ["receipt", "signed_transaction"])
    func restoredPurchase(kind: String, proof: String) async throws {
        let harness = try await WorkerHarness()
        let original = try await harness.purchase(["product_id": "level.pack", "type": kind])
        let restore = try await harness.purchase(["product_id": "level.pack", "restore_of": original.transactionID])
        #expect(restore.transactionID != original.transactionID)
        func evidence(_ purchase: WorkerHarness.Purchase) -> [String: Any] {
            proof == "receipt" ? ["receipt": purchase.receipt] : ["signed_transaction": purchase.signedTransaction]
        }
        try await harness.submit(job("j-first", order: "o-first", product: "level.pack", evidence(original)))
        #expect(await harness.result(jobID: "j-first")?["decision"] as? String == "grant")
        try await harness.submit(job("j-restore", order: "o-second", product: "level.pack", evidence(restore)))
        let denied = await harness.result(jobID: "j-restore")
        #expect(denied?["reason"] as? String == "duplicate_transaction")
        #expect(denied?["transaction_id"] as? String == restore.transactionID)
        await harness.stop()
    }

    @Test(
        "a Retry-After from a bad day (inf, 1e300, the year 3000, negative, past Int64) neither crashes nor parks a job",
        arguments: ["inf", "1e300", "Wed, 01 Jan 3000 00:00:00 GMT", "-5", "99999999999999999999999", "soon"])
    func hostileRetryAfter(header: String) async throws {
        let harness = try await WorkerHarness(maxAttempts: 50)
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        try await harness.faults(["rate_limit_rate": 1.0, "retry_after_header": header])
        try await harness.submit(job("j-429", order: "o-429", product: "coins.100", ["receipt": purchase.receipt]))
        // Two 429s with that header, then Apple is back.
        #expect(await eventually { (try? await harness.admin.appleRequests()) ?? 0 >= 2 })
        try await harness.faults([:])
        // retry.max_backoff_ms is 200 ms here: whatever the header said, the job is tried again soon (well within
        // the 30 s waited here for its way back through the broker on a busy machine).
        let event = await harness.result(jobID: "j-429", timeout: .seconds(30))
        #expect(event?["decision"] as? String == "grant")
        #expect((event?["attempts"] as? Int ?? 0) > 1)
        await harness.stop()
    }

    @Test("an answer that is not JSON (a proxy's error page with HTTP 200) is retried, never a deny")
    func garbageAnswers() async throws {
        let harness = try await WorkerHarness(maxAttempts: 50)
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        try await harness.faults(["garbage_rate": 1.0])
        try await harness.submit(job("j-html", order: "o-html", product: "coins.100", ["receipt": purchase.receipt]))
        #expect(await eventually { (try? await harness.admin.appleRequests()) ?? 0 >= 2 })
        #expect(harness.results(jobID: "j-html").isEmpty)
        try await harness.faults([:])
        let event = await harness.result(jobID: "j-html", timeout: .seconds(30))
        #expect(event?["decision"] as? String == "grant")
        await harness.stop()
    }

    @Test("a poisoned job (a 6 KB job id) on PostgreSQL costs only itself: the genuine jobs behind it are answered")
    func poisonedJobOnPostgres() async throws {
        let url = try makePostgresDatabase()
        let harness = try await WorkerHarness { $0.ledgerURL = url }
        let poison = "a" + String(repeating: "\u{0301}", count: 3_000)
        try await harness.submit(
            raw: Data(
                "{\"job_id\":\"\(poison)\",\"order_id\":\"o-poison\",\"user_id\":\"u\",\"product_id\":\"p\",\"receipt\":\"QUJD\"}"
                    .utf8), key: "same-key")
        var ids: [String] = []
        for index in 0..<5 {
            let purchase = try await harness.purchase(["product_id": "coins.100"])
            ids.append("after-\(index)")
            try await harness.submit(
                job("after-\(index)", order: "o-after-\(index)", product: "coins.100", ["receipt": purchase.receipt]),
                key: "same-key")
        }
        #expect(await eventually(timeout: .seconds(60)) { ids.allSatisfy { !harness.results(jobID: $0).isEmpty } })
        #expect(await eventually { harness.deadLetters.count == 1 })
        #expect(harness.deadLetters.first?.header("dlq_reason")?.stringValue == "malformed_job")
        await harness.stop()
    }
}
