import AppleVerification
import Foundation
import Ledger
import Runtime
import Testing

@testable import ReceiptWorker

/// The consumption flow's rules (docs/contract.md section 9) through its handler, with an in-memory ledger and
/// Apple's Send Consumption Information answered here.
@Suite("The consumption flow: every rule, in memory")
struct ConsumptionHandlerTests {
    let apple = FakeApple()
    let consumption = FakeConsumption()
    let ledger: SQLiteLedger

    init() throws { ledger = try Handlers.ledger() }

    func handler(consumption: FakeConsumption?, maxAttempts: Int = 3) throws -> ConsumptionHandler {
        var retry = RetryPolicy()
        retry.maxAttempts = maxAttempts
        retry.initialBackoff = .milliseconds(1)
        retry.maxBackoff = .milliseconds(2)
        return ConsumptionHandler(
            apps: try Handlers.apps(apple, second: FakeApple(), consumption: consumption), requests: ledger,
            retry: retry, metrics: WorkerMetrics(), logger: Handlers.logger)
    }

    func answer(_ fields: [String: Any]) -> [UInt8] {
        var answer: [String: Any] = [
            "transaction_id": "1000", "customer_consented": true, "sample_content_provided": false,
        ]
        answer.merge(fields) { $1 }
        return Array(try! JSONSerialization.data(withJSONObject: answer))
    }

    func grant(_ id: String) async throws {
        let jobs = Handlers.jobs(try Handlers.apps(apple), ledger: ledger)
        apple.verified(Handlers.proof("proof-\(id)"), transactionID: id)
        _ = try await Handlers.run(
            jobs, Handlers.job("job-\(id)", order: "order-\(id)", proof: ["receipt": Handlers.proof("proof-\(id)")]))
    }

    func run(_ handler: ConsumptionHandler, _ value: [UInt8]) async throws -> Outcome {
        try await Handlers.run(handler, value, topic: "consumption")
    }

    @Test("an answer is sent with the grant's delivery status; without the player's consent nothing is sent")
    func sent() async throws {
        try await grant("1000")
        let handler = try handler(consumption: consumption)
        let outcome = try await run(handler, answer(["consumption_percentage": 80]))
        #expect(outcome.deadLetter == nil)
        let body = try #require(consumption.bodies.first)
        #expect(body.transactionID == "1000" && body.environment == .production)
        #expect(
            body.body.contains(#""deliveryStatus":"DELIVERED""#)
                && body.body.contains(#""consumptionPercentage":80000"#))
        _ = try await run(handler, answer(["customer_consented": false]))
        #expect(consumption.bodies.count == 1)
    }

    @Test(
        "refused by Apple, malformed, for another app, or for an app without a key: dead-lettered consumption_not_sent"
    )
    func notSent() async throws {
        try await grant("1000")
        consumption.answer([.success(.refused(status: 400, errorCode: 4000035))])
        let handler = try handler(consumption: consumption)
        #expect(try await run(handler, answer([:])).deadLetter?.reason == "consumption_not_sent")
        #expect(try await run(handler, Array("{}".utf8)).deadLetter?.reason == "consumption_not_sent")
        let wrongApp = try await run(handler, answer(["bundle_id": "com.example.second"]))
        #expect(wrongApp.deadLetter?.error.contains("not the app the purchase was granted for") == true)
        let noKey = try await run(try self.handler(consumption: nil), answer([:]))
        #expect(noKey.deadLetter?.error.contains("no App Store Server API key") == true)
    }

    @Test("transient failures are retried; when retries run out the answer is dead-lettered with its attempts")
    func transient() async throws {
        try await grant("1000")
        let failure = AppleVerificationError(.httpStatus, "sendConsumption: HTTP 503", isRetriable: true)
        consumption.answer([.failure(failure), .success(.accepted)])
        let handler = try handler(consumption: consumption, maxAttempts: 3)
        #expect(try await run(handler, answer([:])).deadLetter == nil)
        consumption.answer(Array(repeating: .failure(failure), count: 3))
        let exhausted = try await run(handler, answer([:]))
        #expect(exhausted.deadLetter?.reason == "consumption_not_sent" && exhausted.deadLetter?.attempts == 3)
    }
}
