import AppStoreSimulator
import AppleVerification
import Foundation
import HTTPClient
import TestSupport
import Testing

@Suite("verifyReceipt against the simulator over HTTP", .timeLimit(.minutes(1)))
struct VerifyReceiptClientTests {
    @Test("a production receipt is valid, with its transaction, in one call")
    func productionReceipt() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "coins.100", "quantity": 3])
        var attempts = 0
        let outcome = try await harness.receiptClient().verify(receipt: purchase.receipt, attempts: &attempts)
        guard case .valid(let response, let environment) = outcome else {
            Issue.record("not valid: \(outcome)"); return
        }
        #expect(environment == "Production")
        #expect(attempts == 1)
        let entry = try #require(response.receipt?.inApp?.first)
        #expect(entry.transactionId == purchase.transactionID)
        #expect(entry.quantity == "3")
        #expect(entry.purchaseDateMs.flatMap(Double.init) != nil)
    }

    @Test(
        "a sandbox receipt: refused without asking the sandbox when not allowed; verified there after 21007 when allowed"
    )
    func sandboxRedirect() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "coins.100", "environment": "Sandbox"])
        var attempts = 0
        let refused = try await harness.receiptClient(allowSandbox: false).verify(
            receipt: purchase.receipt, attempts: &attempts)
        guard case .sandboxNotAllowed = refused else {
            Issue.record("expected sandboxNotAllowed, got \(refused)"); return
        }
        #expect(attempts == 1)

        attempts = 0
        let allowed = try await harness.receiptClient(allowSandbox: true).verify(
            receipt: purchase.receipt, attempts: &attempts)
        guard case .valid(_, let environment) = allowed else { Issue.record("expected valid, got \(allowed)"); return }
        #expect(environment == "Sandbox")
        #expect(attempts == 2)
    }

    @Test("a wrong shared secret (21004) is our configuration: retriable, never a verdict on the receipt")
    func sharedSecret() async throws {
        let harness = try SimulatorHarness(sharedSecret: "right")
        let purchase = try await harness.purchase(["product_id": "sub.monthly", "type": "subscription"])
        var attempts = 0
        let error = await #expect(throws: AppleVerificationError.self) {
            try await harness.receiptClient(secret: "wrong").verify(receipt: purchase.receipt, attempts: &attempts)
        }
        #expect(error?.isRetriable == true)
        #expect(error?.reason.contains("21004") == true && error?.reason.contains("wrong") == false)
        let right = try await harness.receiptClient(secret: "right").verify(
            receipt: purchase.receipt, attempts: &attempts)
        guard case .valid(let response, _) = right else { Issue.record("expected valid, got \(right)"); return }
        #expect(response.latestReceiptInfo?.first?.expiresDateMs != nil)
    }

    @Test(
        "21002 of a garbage receipt is possibly malformed, uncounted by the breaker; of a receipt Apple signed, during Apple's bad minute, transient and counted"
    )
    func status21002() async throws {
        let harness = try SimulatorHarness()
        let signatures = try ReceiptSignatureVerifier(rootCertificates: [Data(AppStoreSimulator.testRootPEM.utf8)])
        let breakers = CircuitBreakers()
        let client = harness.receiptClient(signatures: signatures, breakers: breakers)
        var attempts = 0
        for _ in 0..<25 {
            let garbage = await #expect(throws: AppleVerificationError.self) {
                try await client.verify(receipt: "bm9wZQ==", attempts: &attempts)
            }
            #expect(garbage?.code == .possiblyMalformed && garbage?.isRetriable == true)
        }
        #expect(breakers.states.first { $0.call == "verify_receipt_production" }?.state == .closed)
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        try await harness.admin.faults(["outage_start_in_ms": 0, "outage_seconds": 600, "outage_mode": "status_21002"])
        let temporary = await #expect(throws: AppleVerificationError.self) {
            try await client.verify(receipt: purchase.receipt, attempts: &attempts)
        }
        #expect(temporary?.code == .appleStatus && temporary?.isRetriable == true)
        #expect(temporary?.reason.contains("21002") == true)
        try await harness.admin.faults([:])
        guard case .valid = try await client.verify(receipt: purchase.receipt, attempts: &attempts) else {
            Issue.record("the receipt did not verify once Apple recovered"); return
        }
    }

    @Test(
        "a half-open trial whose job is let go (its partition released) gives the trial back: the next call goes through at once"
    )
    func cancelledTrial() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        let breakers = CircuitBreakers()
        let client = harness.receiptClient(breakers: breakers)
        let breaker = breakers.breaker(for: "verify_receipt_production")
        for _ in 0..<100 { breaker.record(success: false) }
        #expect(breaker.state == .open)
        try await Task.sleep(for: .seconds(1.2))  // the cool-down: the next call is the trial
        try await harness.faults(["latency_ms": 20_000])
        let trial = Task {
            var attempts = 0
            return try await client.verify(receipt: purchase.receipt, attempts: &attempts)
        }
        try await Task.sleep(for: .milliseconds(500))  // the trial's request is in flight
        trial.cancel()
        _ = await trial.result
        try await harness.faults([:])
        let started = ContinuousClock.now
        var attempts = 0
        guard case .valid = try await client.verify(receipt: purchase.receipt, attempts: &attempts) else {
            Issue.record("the receipt did not verify"); return
        }
        // Held for the trial's timeout (30 s) without it; at once with it (a busy machine: well within 15 s).
        #expect(ContinuousClock.now - started < .seconds(15), "the cancelled trial held the breaker")
    }

    @Test("slow Apple: the request times out with a retriable error, not a rejection")
    func timeout() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        // The answer would come after 20 s: a timeout well before it is the client's, whatever the load.
        try await harness.faults(["latency_ms": 20_000])
        var attempts = 0
        let started = ContinuousClock.now
        let error = await #expect(throws: AppleVerificationError.self) {
            _ = try await harness.receiptClient(timeout: .milliseconds(300)).verify(
                receipt: purchase.receipt, attempts: &attempts)
        }
        #expect(error?.code == .timeout)
        #expect(error?.isRetriable == true)
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test(
        "dropped connections, 5xx and 21005 are retriable",
        arguments: [
            ["drop_rate": 1.0], ["error_rate": 1.0, "error_status": 503], ["status_21005_rate": 1.0],
        ] as [[String: Double]])
    func transientFailures(faults: [String: Double]) async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        try await harness.faults(faults)
        var attempts = 0
        let error = await #expect(throws: AppleVerificationError.self) {
            _ = try await harness.receiptClient().verify(receipt: purchase.receipt, attempts: &attempts)
        }
        #expect(error?.isRetriable == true)
        #expect(error.map { "\($0)" }?.contains(purchase.receipt) == false)
    }

    @Test("429 with Retry-After in UNIX milliseconds is retriable and says when")
    func rateLimited() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "coins.100"])
        // 20 s ahead: what the client reads is "about 20 s", however long the answer took on a loaded machine.
        try await harness.faults(["rate_limit_rate": 1.0, "retry_after_seconds": 20.0])
        var attempts = 0
        let error = await #expect(throws: AppleVerificationError.self) {
            _ = try await harness.receiptClient().verify(receipt: purchase.receipt, attempts: &attempts)
        }
        #expect(error?.code == .rateLimited)
        let retryAfter = try #require(error?.retryAfter)
        #expect(retryAfter > 10 && retryAfter <= 20.1)
    }

    @Test("cancelling the caller aborts the request")
    func cancellation() async throws {
        let harness = try SimulatorHarness()
        try await harness.faults(["latency_ms": 20_000])  // cancelled well before this answer
        let task = Task {
            try await harness.http.execute(
                HTTPRequest(method: .post, url: "\(harness.base)/production/verifyReceipt", body: Data("{}".utf8)))
        }
        #expect(await eventually(timeout: .seconds(5)) { harness.http.inFlight == 1 })
        let started = ContinuousClock.now
        task.cancel()
        let error = await #expect(throws: HTTPClientError.self) { try await task.value }
        #expect(error?.kind == .cancelled)
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(await eventually(timeout: .seconds(5)) { harness.http.inFlight == 0 })
    }
}
