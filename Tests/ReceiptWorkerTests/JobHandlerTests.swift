import AppleVerification
import Crypto
@testable import Flows
import Foundation
import Kafka
import Ledger
@testable import ReceiptWorker
import Runtime
import Testing
import Vocabulary

/// The job flow's rules through its handler, with an in-memory ledger and Apple's answers given here:
/// every row of the contract's decision table, the ledger's claims, app isolation, retries.
@Suite("The job flow: every rule, in memory")
struct JobHandlerTests {
    let apple = FakeApple()
    let ledger: LedgerEngine

    init() throws { ledger = try Handlers.ledger() }

    func handler(second: FakeApple? = nil, maxAttempts: Int = 4) throws -> JobHandler {
        var retry = RetryPolicy()
        retry.maxAttempts = maxAttempts
        retry.initialBackoff = .milliseconds(1)
        retry.maxBackoff = .milliseconds(2)
        return Handlers.jobs(try Handlers.apps(apple, second: second), ledger: ledger, retry: retry)
    }

    func run(_ handler: JobHandler, _ job: [UInt8], offset: Int64 = 0) async throws -> Disposition {
        try await Handlers.run(handler, job, offset: offset)
    }

    @Test(
        "a job waits in its game's slots, also one that is not valid: it names its game; unknown or unreadable: the default's"
    )
    func groupOfEachJob() throws {
        let handler = try handler(second: FakeApple())
        func group(_ value: [UInt8]) -> String {
            handler.intake(
                of: InboundMessage(
                    topic: "jobs", partition: 0, offset: 0, key: nil, value: value, headers: [], timestamp: nil)
            ).group
        }
        #expect(group(Handlers.job("j1", order: "o1", extra: ["bundle_id": "com.example.second"])) == "second")
        #expect(group(Handlers.job("j2", order: "o2")) == "default")
        // Not valid (quantity 0), but naming its game: that game's room, where its game's jobs are parked.
        #expect(
            group(Handlers.job("j3", order: "o3", extra: ["bundle_id": "com.example.second", "quantity": 0]))
                == "second")
        #expect(group(Handlers.job("j4", order: "o4", extra: ["bundle_id": "com.other", "quantity": 0])) == "default")
        #expect(group(Array("not json".utf8)) == "default")
    }

    @Test("a verified purchase is granted, with CloudEvents headers; the same job again repeats the event")
    func grantAndReplay() async throws {
        let handler = try handler()
        apple.verified("cmVjZWlwdA==", transactionID: "1000")
        let first = try await run(handler, Handlers.job("j1", order: "o1"))
        let event = try #require(first.event)
        #expect(event["decision"] as? String == "grant" && event["reason"] as? String == "verified")
        #expect(event["transaction_id"] as? String == "1000" && event["bundle_id"] as? String == "com.example")
        #expect(first.headers["ce_type"] == "receipt.granted" && first.headers["ce_id"] == event["event_id"] as? String)
        let again = try await run(handler, Handlers.job("j1", order: "o1"))
        #expect(again.event?["event_id"] as? String == event["event_id"] as? String)
        #expect(again.event?["verified_at"] as? String == event["verified_at"] as? String)
        #expect(apple.calls == 1, "a job delivered again is answered from the ledger, without Apple")
    }

    @Test("a signed transaction delivered again, checked again without a lookup first, gets its first answer")
    func signedReplay() async throws {
        let handler = try handler()
        let signed = ["signed_transaction": "header.payload.signature"]
        apple.verified("header.payload.signature", transactionID: "1000")
        let first = try await run(handler, Handlers.job("j1", order: "o1", proof: signed))
        let event = try #require(first.event)
        #expect(event["decision"] as? String == "grant")
        let again = try await run(handler, Handlers.job("j1", order: "o1", proof: signed))
        #expect(again.event?["event_id"] as? String == event["event_id"] as? String)
        #expect(again.event?["verified_at"] as? String == event["verified_at"] as? String)
        // Its check cannot be made this time (a refusal, not a verdict): still its first answer, never a dead
        // letter for a job that was answered.
        apple.fail([AppleVerificationError(.unauthorized, "a refusal", isRetriable: false)])
        let refused = try await run(handler, Handlers.job("j1", order: "o1", proof: signed))
        #expect(refused.deadLetter == nil)
        #expect(refused.event?["event_id"] as? String == event["event_id"] as? String)
        #expect(apple.calls == 3, "each delivery of a signed transaction is checked, locally")
    }

    /// One row of the decision table: what Apple says, and the deny it gives.
    struct Row: Sendable, CustomTestStringConvertible {
        let reason: String
        let verdict: @Sendable (FakeApple) -> Void
        let job: [String: any Sendable]
        var testDescription: String { reason }

        init(
            _ reason: String, job: [String: any Sendable] = [:], _ verdict: @escaping @Sendable (FakeApple) -> Void
        ) {
            self.reason = reason
            self.job = job
            self.verdict = verdict
        }
    }

    static let rows: [Row] = [
        Row("invalid_receipt") { $0.answer("cmVjZWlwdA==", .rejected(.invalidReceipt, detail: "21002")) },
        Row("bundle_mismatch") { $0.answer("cmVjZWlwdA==", .rejected(.bundleMismatch, detail: "another app")) },
        Row("sandbox_not_allowed") { $0.answer("cmVjZWlwdA==", .rejected(.sandboxNotAllowed, detail: "21007")) },
        Row("transaction_not_found", job: ["transaction_id": "9"]) {
            $0.answer("cmVjZWlwdA==", .rejected(.transactionNotFound, detail: "none"))
        },
        Row("product_mismatch", job: ["transaction_id": "1"]) {
            $0.verified("cmVjZWlwdA==", transactionID: "1", product: "gems_5000")
        },
        Row("transaction_not_found") { $0.verified("cmVjZWlwdA==", transactionID: "1", product: "gems_5000") },
        Row("quantity_mismatch", job: ["quantity": 2]) { $0.verified("cmVjZWlwdA==", transactionID: "1") },
        Row("account_mismatch", job: ["app_account_token": "7e3fb20b-4cdb-47cc-936d-99d65f608138"]) {
            $0.verified("cmVjZWlwdA==", transactionID: "1", token: "00000000-0000-0000-0000-000000000001")
        },
        Row("revoked") { $0.verified("cmVjZWlwdA==", transactionID: "1", revoked: Date(timeIntervalSinceNow: -1)) },
        Row("expired") {
            $0.verified(
                "cmVjZWlwdA==", transactionID: "1", type: .autoRenewableSubscription,
                expires: Date(timeIntervalSinceNow: -1))
        },
    ]

    @Test("the first failing check names the deny reason; the deny is stored and replayed", arguments: rows)
    func denials(row: Row) async throws {
        let handler = try handler()
        row.verdict(apple)
        let job = Handlers.job("j-\(row.reason)", order: "o-\(row.reason)", extra: row.job.mapValues { $0 as Any })
        let outcome = try await run(handler, job)
        let event = try #require(outcome.event)
        #expect(event["decision"] as? String == "deny")
        #expect(event["reason"] as? String == row.reason)
        #expect(outcome.headers["ce_type"] == "receipt.denied")
        #expect(try await run(handler, job).event?["event_id"] as? String == event["event_id"] as? String)
    }

    @Test(
        "the ledger's rows: a purchase granted to another order is duplicate_transaction; another purchase for a granted order is order_already_fulfilled"
    )
    func ledgerRows() async throws {
        let handler = try handler()
        apple.verified("cmVjZWlwdA==", transactionID: "1000")
        apple.verified("b3RoZXI=", transactionID: "2000")
        _ = try await run(handler, Handlers.job("j1", order: "o1"))
        let replayed = try await run(handler, Handlers.job("j2", order: "o2"))
        #expect(replayed.event?["reason"] as? String == "duplicate_transaction")
        let other = try await run(handler, Handlers.job("j3", order: "o1", proof: ["receipt": "b3RoZXI="]))
        #expect(other.event?["reason"] as? String == "order_already_fulfilled")
        // The same order and purchase again, from another job: the same grant, the same event id.
        let same = try await run(handler, Handlers.job("j4", order: "o1"))
        #expect(same.event?["decision"] as? String == "grant")
    }

    @Test("a restore (another transaction id of a non-consumable) for another order is duplicate_transaction")
    func restores() async throws {
        let handler = try handler()
        apple.verified("cmVjZWlwdA==", transactionID: "100", type: .nonConsumable)
        apple.verified("cmVzdG9yZQ==", transactionID: "200", type: .nonConsumable, original: "100")
        #expect(try await run(handler, Handlers.job("j1", order: "o1")).event?["decision"] as? String == "grant")
        let restore = try await run(handler, Handlers.job("j2", order: "o2", proof: ["receipt": "cmVzdG9yZQ=="]))
        #expect(restore.event?["reason"] as? String == "duplicate_transaction")
        let sameOrder = try await run(handler, Handlers.job("j3", order: "o1", proof: ["receipt": "cmVzdG9yZQ=="]))
        #expect(sameOrder.event?["reason"] as? String == "order_already_fulfilled")
    }

    @Test("a malformed job with an order is denied malformed_job and dead-lettered; without one, dead-lettered only")
    func malformed() async throws {
        let handler = try handler()
        let invalid = try await run(handler, Handlers.job("j1", order: "o1", extra: ["quantity": "2"]))
        #expect(invalid.deadLetter?.reason == .malformedJob)
        #expect(invalid.event?["reason"] as? String == "malformed_job")
        #expect(invalid.event?["order_id"] as? String == "o1")
        let unreadable = try await run(handler, Array("not json".utf8))
        #expect(unreadable.deadLetter?.reason == .malformedJob)
        #expect(unreadable.events.isEmpty)
        // A job in support's reserved space: answered and dead-lettered, but its id is unusable: never stored (the
        // ledger keeps support's results for good: a client could fill it), never in an event.
        let forged = Handlers.job("support:1000", order: "o2")
        let reserved = try await run(handler, forged)
        #expect(reserved.deadLetter?.reason == .malformedJob)
        #expect(reserved.event?["reason"] as? String == "malformed_job")
        #expect(reserved.event?["job_id"] as? String == "", "an event with a support: id would pass for support's")
        #expect(
            try await ledger.storedDecision(
                DecisionKey(app: .defaultApp, jobID: "support:1000", fingerprint: SHA256Digest.hex(forged))) == nil)
        #expect(apple.calls == 0)
    }

    @Test("a bundle id no app has is bundle_mismatch, without a call to Apple")
    func unknownApp() async throws {
        let outcome = try await run(try handler(), Handlers.job("j1", order: "o1", extra: ["bundle_id": "com.nobody"]))
        #expect(outcome.event?["reason"] as? String == "bundle_mismatch")
        #expect(outcome.event?["bundle_id"] as? String == "com.nobody")
        #expect(apple.calls == 0)
    }

    @Test(
        "transient failures are retried, never a deny; past retry.max_attempts the job is dead-lettered with its attempts"
    )
    func retries() async throws {
        let handler = try handler(maxAttempts: 4)
        apple.verified("cmVjZWlwdA==", transactionID: "1000")
        let transient = AppleVerificationError(.httpStatus, "verifyReceipt: HTTP 503", isRetriable: true)
        apple.fail([transient, transient])
        let granted = try await run(handler, Handlers.job("j1", order: "o1"))
        #expect(granted.event?["decision"] as? String == "grant")
        #expect(granted.event?["attempts"] as? Int == 3)
        apple.fail(Array(repeating: transient, count: 4))
        let exhausted = try await run(handler, Handlers.job("j2", order: "o2"))
        #expect(exhausted.deadLetter == DeadLetter(reason: .retriesExhausted, error: transient.reason, attempts: 4))
        #expect(exhausted.events.isEmpty)
        apple.fail([AppleVerificationError(.unauthorized, "transactionInfo: HTTP 401", isRetriable: false)])
        let refused = try await run(handler, Handlers.job("j3", order: "o3"))
        #expect(refused.deadLetter?.reason == .cannotVerify)
        #expect(refused.deadLetter?.attempts == 1)
    }

    @Test(
        "verifyReceipt's 21002 (malformed, or Apple's temporary issue) is asked again: granted when Apple recovers, denied invalid_receipt only after apple.verify_receipt.status_21002_calls calls"
    )
    func status21002() async throws {
        let handler = try handler(maxAttempts: 8)
        apple.verified("cmVjZWlwdA==", transactionID: "1000")
        let malformed = AppleVerificationError(.possiblyMalformed, "verifyReceipt status 21002", isRetriable: true)
        // Apple's bad minute: four answers of 21002, then the receipt verifies.
        apple.fail(Array(repeating: malformed, count: 4))
        let granted = try await run(handler, Handlers.job("j1", order: "o1"))
        #expect(granted.event?["decision"] as? String == "grant")
        #expect(granted.event?["attempts"] as? Int == 5)
        // A receipt Apple calls malformed every time: a deny after five calls, never a dead letter.
        apple.fail(Array(repeating: malformed, count: 5))
        let denied = try #require(try await run(handler, Handlers.job("j2", order: "o2")).event)
        #expect(denied["decision"] as? String == "deny" && denied["reason"] as? String == "invalid_receipt")
        #expect(denied["attempts"] as? Int == 5)
        #expect((denied["detail"] as? String)?.contains("21002") == true)
        // 21002 for a receipt Apple signed is transient like a 5xx: past retry.max_attempts, a dead letter.
        let temporary = AppleVerificationError(.appleStatus, "verifyReceipt status 21002 (signed)", isRetriable: true)
        apple.fail(Array(repeating: temporary, count: 8))
        let exhausted = try await run(handler, Handlers.job("j3", order: "o3"))
        #expect(exhausted.deadLetter?.reason == .retriesExhausted && exhausted.events.isEmpty)
    }

    @Test(
        "21002's waits double from their first whatever retry.max_backoff_ms: a short backoff never turns Apple's bad minute into a deny within it"
    )
    func status21002WaitsNotCapped() async throws {
        var retry = RetryPolicy()
        retry.maxAttempts = 8
        retry.initialBackoff = .milliseconds(1)
        retry.maxBackoff = .milliseconds(2)
        let handler = Handlers.jobs(
            try Handlers.apps(apple), ledger: ledger, retry: retry, malformedReceiptFirstWait: .milliseconds(40))
        let malformed = AppleVerificationError(.possiblyMalformed, "verifyReceipt status 21002", isRetriable: true)
        apple.fail(Array(repeating: malformed, count: 5))
        let started = ContinuousClock.now
        let denied = try #require(try await run(handler, Handlers.job("j1", order: "o1")).event)
        #expect(denied["reason"] as? String == "invalid_receipt" && denied["attempts"] as? Int == 5)
        // Four waits between five calls: 40, 80, 160 and 320 ms at least, not the policy's 2 ms.
        #expect(ContinuousClock.now - started >= .milliseconds(600))
    }

    @Test(
        "two games numbering their jobs and orders from 1 never meet: each gets its own decision, event id and order")
    func gamesAreIsolated() async throws {
        let second = FakeApple()
        let handler = try handler(second: second)
        apple.verified("cmVjZWlwdA==", transactionID: "1000")
        second.verified("cmVjZWlwdA==", transactionID: "5000", product: "gems_5")
        let gameA = try await run(handler, Handlers.job("1", order: "1"))
        let gameB = try await run(
            handler, Handlers.job("1", order: "1", product: "gems_5", extra: ["bundle_id": "com.example.second"]))
        let a = try #require(gameA.event)
        let b = try #require(gameB.event)
        #expect(a["decision"] as? String == "grant" && b["decision"] as? String == "grant")
        #expect(b["transaction_id"] as? String == "5000" && b["bundle_id"] as? String == "com.example.second")
        #expect(a["event_id"] as? String != b["event_id"] as? String)
        #expect(second.calls == 1, "game B's job was verified, not answered with game A's event")
    }

    @Test("a job id reused within one app for another order gets an answer of its own, never the first job's event")
    func reusedJobID() async throws {
        let handler = try handler()
        apple.verified("cmVjZWlwdA==", transactionID: "1000")
        apple.verified("b3RoZXI=", transactionID: "2000")
        let first = try #require(try await run(handler, Handlers.job("42", order: "o1")).event)
        let second = try #require(
            try await run(handler, Handlers.job("42", order: "o2", proof: ["receipt": "b3RoZXI="])).event)
        #expect(second["order_id"] as? String == "o2" && second["decision"] as? String == "grant")
        #expect(second["event_id"] as? String != first["event_id"] as? String)
        // Each is still replayed as itself.
        let again = try await run(handler, Handlers.job("42", order: "o1"))
        #expect(again.event?["event_id"] as? String == first["event_id"] as? String)
    }

    @Test("a Sandbox grant does not make a Production purchase of the same transaction id a duplicate")
    func environmentsAreApart() async throws {
        let handler = try handler()
        apple.verified("c2FuZGJveA==", transactionID: "7", environment: .sandbox)
        apple.verified("cmVjZWlwdA==", transactionID: "7")
        let sandbox = try await run(handler, Handlers.job("j1", order: "o1", proof: ["receipt": "c2FuZGJveA=="]))
        #expect(sandbox.event?["environment"] as? String == "Sandbox")
        let production = try await run(handler, Handlers.job("j2", order: "o2"))
        #expect(production.event?["decision"] as? String == "grant")
    }

    @Test(
        "a malformed job parked and read again keeps the event id of its first reading; a client's parked_from is not believed"
    )
    func parkedMalformedJobKeepsItsID() {
        func message(topic: String, offset: Int64, parkedFrom: String?) -> InboundMessage {
            InboundMessage(
                topic: topic, partition: 1, offset: offset, key: nil, value: Array("{}".utf8),
                headers: parkedFrom.map { [MessageHeader(name: "parked_from", string: $0)] } ?? [], timestamp: nil)
        }
        #expect(
            JobHandler.firstRead(
                message(topic: "retries", offset: 7, parkedFrom: "jobs[3]@42"), retriesTopic: "retries")
                == "jobs[3]@42")
        #expect(
            JobHandler.firstRead(message(topic: "jobs", offset: 42, parkedFrom: "jobs[0]@1"), retriesTopic: "retries")
                == "jobs[1]@42")
        // Put back by `dlq replay`: its original's place, so the replay repeats the original's deny event id; a
        // place that is not one the worker writes is not believed.
        func replayed(_ firstRead: String) -> InboundMessage {
            InboundMessage(
                topic: "jobs", partition: 1, offset: 90, key: nil, value: Array("{}".utf8),
                headers: [
                    MessageHeader(name: "dlq_replayed_from", string: "dlq[0]@3"),
                    MessageHeader(name: "dlq_first_read", string: firstRead),
                ], timestamp: nil)
        }
        func place(_ message: InboundMessage) -> String {
            ReplayedPlace.original(of: message, own: JobHandler.firstRead(message, retriesTopic: "retries"))
        }
        #expect(place(replayed("jobs[1]@42")) == "jobs[1]@42")
        #expect(place(replayed("not a place")) == "jobs[1]@90")
        #expect(place(replayed("jobs[1]@999")) == "jobs[1]@90", "a later place is not believed")
        #expect(place(replayed("jobs[2]@3")) == "jobs[1]@90", "another partition's is not believed")
    }
}
