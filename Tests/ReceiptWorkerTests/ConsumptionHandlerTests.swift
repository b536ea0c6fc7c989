import AppleVerification
@testable import Flows
import Foundation
import Kafka
import Ledger
@testable import ReceiptWorker
import Runtime
import Synchronization
import TestSupport
import Testing
import Vocabulary

/// The consumption flow's rules (docs/contract.md section 9) through its handler, with an in-memory ledger and
/// Apple's Send Consumption Information answered here.
@Suite("The consumption flow: every rule, in memory")
struct ConsumptionHandlerTests {
    let apple = FakeApple()
    let consumption = FakeConsumption()
    let ledger: LedgerEngine

    init() throws { ledger = try Handlers.ledger() }

    func handler(consumption: FakeConsumption?, gated: GatedConsumption? = nil, maxAttempts: Int = 3) throws
        -> ConsumptionHandler
    {
        var retry = RetryPolicy()
        retry.maxAttempts = maxAttempts
        retry.initialBackoff = .milliseconds(1)
        retry.maxBackoff = .milliseconds(2)
        let sender: (any ConsumptionSending)? = gated ?? consumption
        return ConsumptionHandler(
            apps: try Handlers.apps(apple, second: FakeApple(), consumption: sender), requests: ledger,
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

    /// Apple's refund request `id` for transaction 1000, recorded as the notification flow records it.
    func openRequest(_ id: String = "request-1000", respondBy: Date) async throws {
        _ = try await ledger.apply(
            NotificationChange(
                id: id, app: .defaultApp, environment: .production,
                kind: .consumptionRequest(transactionID: "1000", respondBy: respondBy))
        ) { holder in
            StoredEvent(eventID: id, type: "t", time: "", key: holder.grant.orderID, json: Array("{}".utf8))
        }
    }

    /// An app's policy's answer (DECLINE, `answered_by: policy`) at `offset` of the consumption topic.
    func policyAnswer(_ handler: ConsumptionHandler, offset: Int64) async throws -> Disposition {
        try await Handlers.run(
            handler, answer(["refund_preference": "DECLINE"]), topic: "consumption", offset: offset,
            headers: [MessageHeader(name: ConsumptionPolicyAnswers.header, string: "policy")])
    }

    func run(_ handler: ConsumptionHandler, _ value: [UInt8]) async throws -> Disposition {
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

    @Test("an answer without the player's consent closes the request: the oldest-unanswered alarm waits for nothing")
    func noConsentAnswers() async throws {
        try await grant("1000")
        try await openRequest(respondBy: Date(timeIntervalSinceNow: 12 * 3_600))
        #expect(try await ledger.oldestOpenConsumptionRequests()[.defaultApp] != nil)
        // Naming another app than the purchase's: still the game's word that nothing is to be sent.
        let outcome = try await run(
            try handler(consumption: consumption),
            answer(["customer_consented": false, "bundle_id": "com.nobody.example"]))
        #expect(outcome.deadLetter == nil && consumption.bodies.isEmpty)
        #expect(try await ledger.oldestOpenConsumptionRequests().isEmpty)
    }

    @Test("a purchase granted for an app no longer configured is not answered with another app's key")
    func grantOfAnAppGone() async throws {
        let claim = GrantClaim(orderID: "order-3000", transactionID: "3000", userID: "p", productID: "gems")
        let event = StoredEvent(eventID: "e-3000", type: "receipt.granted", time: "", key: "order-3000", json: [])
        #expect(
            try await ledger.record(
                Decision(
                    key: DecisionKey(app: AppScope("retired"), jobID: "j-3000", fingerprint: "f"), grant: claim,
                    event: event)) == .recorded)
        let outcome = try await run(try handler(consumption: consumption), answer(["transaction_id": "3000"]))
        #expect(outcome.deadLetter?.reason == .consumptionNotSent)
        #expect(outcome.deadLetter?.error.contains("not configured") == true)
        #expect(consumption.bodies.isEmpty, "sent with the default app's key")
    }

    @Test(
        "delivery is what was delivered: a purchase refunded in part is still DELIVERED when the answer says none, against the studio's DECLINE never UNDELIVERED"
    )
    func partlyRefundedIsDelivered() async throws {
        try await grant("1000")
        let refund = NotificationChange(
            id: "refund-1000", app: .defaultApp, environment: .production,
            kind: .revoke(purchaseID: .transaction("1000"), transactionID: "1000", at: Date(), share: 33_333))
        _ = try await ledger.apply(refund) { _ in nil }
        let handler = try handler(consumption: consumption)
        let outcome = try await run(handler, answer(["refund_preference": "DECLINE"]))
        #expect(outcome.deadLetter == nil)
        let body = try #require(consumption.bodies.first).body
        #expect(body.contains(#""deliveryStatus":"DELIVERED""#), "the two packs the player holds were delivered")
        #expect(body.contains(#""refundPreference":"DECLINE""#))
    }

    @Test(
        "the default delivery status, case by case: granted, refunded in part or in all, credited unclaimed, never granted"
    )
    func defaultDelivery() {
        func grant(order: String = "o1", revoked: Bool = false, share: Int? = nil) -> GrantRecord {
            GrantRecord(
                app: .defaultApp, environment: .production, orderID: order, transactionID: "1", userID: "u",
                productID: "gems", quantity: 3, revoked: revoked, consumptionRespondBy: nil, refundedShare: share)
        }
        #expect(ConsumptionHandler.deliveryStatus(of: grant()) == "DELIVERED")
        #expect(ConsumptionHandler.deliveryStatus(of: grant(revoked: true, share: 33_333)) == "DELIVERED")
        #expect(ConsumptionHandler.deliveryStatus(of: grant(revoked: true, share: 100_000)) == nil)
        #expect(ConsumptionHandler.deliveryStatus(of: grant(revoked: true)) == nil)
        #expect(
            ConsumptionHandler.deliveryStatus(of: grant(order: "unclaimed:1")) == nil, "no grant service confirmed it")
        #expect(ConsumptionHandler.deliveryStatus(of: nil) == "UNDELIVERED_OTHER")
    }

    @Test("an answer without delivery_status for a credit no order confirmed is not sent: the grant service must say")
    func untiedCreditNeedsTheGrantServicesWord() async throws {
        let reported = NotificationChange(
            id: "report-2000", app: .defaultApp, environment: .production,
            kind: .purchased(
                ReportedPurchase(
                    purchaseID: .transaction("2000"), transactionID: "2000", originalTransactionID: "2000",
                    productID: "gems", quantity: 1, dueAt: Date(timeIntervalSinceNow: -1),
                    event: StoredEvent(
                        eventID: "credit-2000", type: "receipt.unclaimed", time: "", key: "unclaimed:2000", json: []))))
        _ = try await ledger.apply(reported) { _ in nil }
        _ = try await ledger.creditUnclaimed(now: Date(), limit: 10)
        let handler = try handler(consumption: consumption)
        let unsent = try await run(handler, answer(["transaction_id": "2000"]))
        #expect(unsent.deadLetter?.reason == .consumptionNotSent)
        #expect(unsent.deadLetter?.error.contains("delivery_status is required") == true)
        #expect(consumption.bodies.isEmpty)
        let said = try await run(handler, answer(["transaction_id": "2000", "delivery_status": "DELIVERED"]))
        #expect(said.deadLetter == nil && consumption.bodies.count == 1)
    }

    @Test(
        "refused by Apple, malformed, for another app, or for an app without a key: dead-lettered consumption_not_sent"
    )
    func notSent() async throws {
        try await grant("1000")
        consumption.answer([.success(.refused(status: 400, errorCode: 4000035))])
        let handler = try handler(consumption: consumption)
        #expect(try await run(handler, answer([:])).deadLetter?.reason == .consumptionNotSent)
        #expect(try await run(handler, Array("{}".utf8)).deadLetter?.reason == .consumptionNotSent)
        let wrongApp = try await run(handler, answer(["bundle_id": "com.example.second"]))
        #expect(wrongApp.deadLetter?.error.contains("not the app the purchase was granted for") == true)
        let noKey = try await run(try self.handler(consumption: nil), answer([:]))
        #expect(noKey.deadLetter?.error.contains("no App Store Server API key") == true)
    }

    @Test(
        "fields Apple refuses together are dead-lettered before anything is sent, and the request stays open for a corrected answer"
    )
    func refusedTogether() async throws {
        try await grant("1000")
        try await openRequest(respondBy: Date(timeIntervalSinceNow: 12 * 3_600))
        let handler = try handler(consumption: consumption)
        let hostile: [([String: Any], String)] = [
            (["delivery_status": "UNDELIVERED_QUALITY_ISSUE", "consumption_percentage": 20], "must be 0 when"),
            (["refund_preference": "GRANT_PRORATED", "consumption_percentage": 0], "above 0 and below 100"),
            (["refund_preference": "GRANT_PRORATED", "consumption_percentage": 100], "above 0 and below 100"),
            // 0.0004 % is 0 milliunits, as Apple would read it.
            (["refund_preference": "GRANT_PRORATED", "consumption_percentage": 0.0004], "above 0 and below 100"),
        ]
        for (fields, reason) in hostile {
            let outcome = try await run(handler, answer(fields))
            #expect(outcome.deadLetter?.reason == .consumptionNotSent, "\(fields)")
            #expect(outcome.deadLetter?.error.contains(reason) == true, "\(fields)")
        }
        // A share with no delivery status, for a purchase never granted here (UNDELIVERED_OTHER by default).
        let ungranted = try await run(handler, answer(["transaction_id": "4000", "consumption_percentage": 30]))
        #expect(ungranted.deadLetter?.error.contains("must be 0 with delivery status UNDELIVERED_OTHER") == true)
        #expect(consumption.bodies.isEmpty, "Apple was sent what it refuses")
        #expect(try await ledger.oldestOpenConsumptionRequests()[.defaultApp] != nil, "the request was closed")
        // Without consent nothing is sent whatever the fields: the game's word closes the request.
        let withoutConsent = try await run(
            handler,
            answer([
                "customer_consented": false, "delivery_status": "UNDELIVERED_OTHER", "consumption_percentage": 20,
            ]))
        #expect(withoutConsent.deadLetter == nil && consumption.bodies.isEmpty)
        #expect(try await ledger.oldestOpenConsumptionRequests().isEmpty)
        // The honest answers beside them: sent as they are.
        for fields: [String: Any] in [
            ["refund_preference": "GRANT_PRORATED", "consumption_percentage": 25.5],
            ["delivery_status": "UNDELIVERED_OTHER", "consumption_percentage": 0, "refund_preference": "GRANT_FULL"],
            ["transaction_id": "4000", "refund_preference": "DECLINE"],
        ] {
            #expect(try await run(handler, answer(fields)).deadLetter == nil, "\(fields)")
        }
        #expect(consumption.bodies.count == 3)
        #expect(consumption.bodies.first?.body.contains(#""consumptionPercentage":25500"#) == true)
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
        #expect(exhausted.deadLetter?.reason == .consumptionNotSent && exhausted.deadLetter?.attempts == 3)
    }

    @Test("each app's answers have slots of their own: an answer's app is its bundle_id, else the default app")
    func groupPerApp() throws {
        let handler = try handler(consumption: consumption)
        func group(_ fields: [String: Any]) -> String {
            handler.intake(
                of: InboundMessage(
                    topic: "consumption", partition: 0, offset: 0, key: nil, value: answer(fields), headers: [],
                    timestamp: nil)
            ).group
        }
        #expect(group(["bundle_id": "com.example.second"]) == "consumption:second")
        #expect(group([:]) == "consumption:default")
        #expect(group(["bundle_id": "com.example"]) == "consumption:default")
        #expect(group(["bundle_id": "com.unknown"]) == "consumption:default")
    }

    @Test(
        "a grant service's answer still retrying at Apple closes the request for the policy: none is due, and a policy's answer read meanwhile is never sent"
    )
    func policyNeverOverAGrantService() async throws {
        try await grant("1000")
        let respondBy = Date().addingTimeInterval(600)
        try await openRequest(respondBy: respondBy)
        func due() async throws -> [String] {
            try await ledger.dueConsumptionRequests(
                app: .defaultApp, dueBy: respondBy.addingTimeInterval(1), now: Date(), limit: 10
            ).map(\.transactionID)
        }
        #expect(try await due() == ["1000"], "nobody answered yet: due for the policy")
        let gated = GatedConsumption()
        let handler = try handler(consumption: nil, gated: gated, maxAttempts: 100)
        let grantService = Task {
            try await Handlers.run(
                handler, answer(["refund_preference": "GRANT_PRORATED"]), topic: "consumption", offset: 1)
        }
        // Apple fails the grant service's answer once: it is retrying now, not accepted.
        #expect(await eventually(timeout: .seconds(10)) { gated.pending == 1 })
        gated.release(.failure(AppleVerificationError(.httpStatus, "HTTP 503", isRetriable: true)))
        #expect(await eventually(timeout: .seconds(10)) { gated.pending == 1 && gated.bodies.count == 2 })
        #expect(try await due().isEmpty, "a grant service answered: nothing is due for the policy")
        let policy = try await policyAnswer(handler, offset: 2)
        #expect(policy.deadLetter == nil && policy.events.isEmpty, "the policy's answer ends quietly")
        gated.release(.success(.accepted))
        #expect(try await grantService.value.deadLetter == nil)
        #expect(gated.bodies.count == 2 && gated.bodies.allSatisfy { $0.contains("GRANT_PRORATED") })
    }

    @Test(
        "a grant service's answer read after a policy's began (its offset older) is not superseded by it: it waits for the policy's call in flight and reaches Apple last"
    )
    func grantServiceAfterPolicyInFlight() async throws {
        try await grant("1000")
        try await openRequest(respondBy: Date().addingTimeInterval(600))
        let gated = GatedConsumption()
        let handler = try handler(consumption: nil, gated: gated, maxAttempts: 100)
        // The policy's answer checked the ledger before the grant service's was recorded, and is at Apple now.
        let policy = Task { try await policyAnswer(handler, offset: 2) }
        #expect(await eventually(timeout: .seconds(10)) { gated.pending == 1 })
        let grantService = Task {
            try await Handlers.run(
                handler, answer(["refund_preference": "GRANT_PRORATED"]), topic: "consumption", offset: 1)
        }
        let policyTicket = AnswerSuccession.Ticket(transactionID: "1000", sequence: 1, place: nil)
        #expect(
            await eventually(timeout: .seconds(10)) { handler.succession.isSuperseded(policyTicket) },
            "the grant service's answer began over the policy's")
        gated.release(.success(.accepted))
        #expect(await eventually(timeout: .seconds(10)) { gated.pending == 1 && gated.bodies.count == 2 })
        gated.release(.success(.accepted))
        #expect(try await grantService.value.deadLetter == nil)
        _ = try await policy.value
        #expect(gated.bodies.count == 2 && gated.bodies.last?.contains("GRANT_PRORATED") == true, "\(gated.bodies)")
        // Once both ended, a policy's answer again is refused by the ledger: a grant service answered.
        let late = try await policyAnswer(handler, offset: 3)
        #expect(late.deadLetter == nil && gated.bodies.count == 2)
    }

    @Test(
        "a grant service's answer for another app is dead-lettered before it begins: it supersedes no policy's answer, and the request stays unanswered"
    )
    func wrongAppAnswerSupersedesNothing() async throws {
        try await grant("1000")
        let gated = GatedConsumption()
        let handler = try handler(consumption: nil, gated: gated, maxAttempts: 100)
        let policy = Task { try await policyAnswer(handler, offset: 2) }
        #expect(await eventually(timeout: .seconds(10)) { gated.pending == 1 })
        let wrong = try await Handlers.run(
            handler, answer(["refund_preference": "GRANT_FULL", "bundle_id": "com.example.other"]),
            topic: "consumption", offset: 3)
        #expect(wrong.deadLetter?.reason == .consumptionNotSent)
        let policyTicket = AnswerSuccession.Ticket(transactionID: "1000", sequence: 1, place: nil)
        #expect(!handler.succession.isSuperseded(policyTicket), "a wrong app's answer took over")
        gated.release(.success(.accepted))
        #expect(try await policy.value.deadLetter == nil)
        #expect(
            try await ledger.consumptionRequestAnswered(
                app: .defaultApp, environment: .production, transactionID: "1000") == false)
    }

    @Test("a policy's answer never supersedes a grant service's in hand; a grant service's supersedes a policy's")
    func policyBelowGrantService() {
        let succession = AnswerSuccession()
        func place(_ offset: Int64) -> AnswerSuccession.Place? { AnswerSuccession.Place("consumption[0]@\(offset)") }
        let service = succession.begin(transactionID: "1", place: place(1))
        #expect(service != nil)
        #expect(succession.begin(transactionID: "1", place: place(2), byPolicy: true) == nil, "over a grant service")
        let policy = succession.begin(transactionID: "2", place: place(5), byPolicy: true)
        let older = succession.begin(transactionID: "2", place: place(4))
        #expect(older != nil, "a grant service's answer, though read before the policy's")
        #expect(policy.map(succession.isSuperseded) == true)
        // Between grant services the newer place wins, as before.
        #expect(succession.begin(transactionID: "2", place: place(3)) == nil)
        // Ended, a policy's answer does not keep a grant service's out.
        if let policy { succession.end(policy) }
        if let older { succession.end(older) }
        let third = succession.begin(transactionID: "3", place: place(9), byPolicy: true)
        if let third { succession.end(third) }
        #expect(succession.begin(transactionID: "3", place: place(8)) != nil)
        // A policy's answer after a grant service's that ended does not make an older grant service's look new.
        if let service = succession.begin(transactionID: "4", place: place(10)) { succession.end(service) }
        let after = succession.begin(transactionID: "4", place: place(12), byPolicy: true)
        #expect(after != nil, "the ledger weighs a policy's answer after a grant service's that ended")
        #expect(succession.begin(transactionID: "4", place: place(5)) == nil, "older than the grant service's newest")
        if let after { succession.end(after) }
        #expect(succession.begin(transactionID: "4", place: place(5)) == nil, "and once all ended")
    }

    @Test(
        "a second refund request for a transaction whose first one a grant service answered is open again: due for the policy, not answered"
    )
    func secondRequestOpenAgain() async throws {
        try await grant("1000")
        func due(by: Date) async throws -> [String] {
            try await ledger.dueConsumptionRequests(app: .defaultApp, dueBy: by, now: Date(), limit: 10)
                .map(\.transactionID)
        }
        func answered() async throws -> Bool {
            try await ledger.consumptionRequestAnswered(
                app: .defaultApp, environment: .production, transactionID: "1000")
        }
        let first = Date().addingTimeInterval(600)
        try await openRequest("request-1", respondBy: first)
        try await ledger.consumptionAnswerReceived(app: .defaultApp, environment: .production, transactionID: "1000")
        #expect(try await answered())
        #expect(try await due(by: first.addingTimeInterval(1)).isEmpty, "the first was answered")
        // The customer asks again (a later request, a later deadline): nobody has answered this one.
        let second = first.addingTimeInterval(3_600)
        try await openRequest("request-2", respondBy: second)
        #expect(try await answered() == false, "the first request's answer does not answer the second")
        #expect(try await due(by: second.addingTimeInterval(1)) == ["1000"])
        // The first request delivered again late (a backfill) does not reopen or move the second.
        try await ledger.consumptionAnswerReceived(app: .defaultApp, environment: .production, transactionID: "1000")
        try await openRequest("request-1", respondBy: first)
        #expect(try await answered())
    }

    @Test(
        "an app's policy answers a request opened again, though this replica answered the first one by policy")
    func policyAnswersReopenedRequest() async throws {
        try await grant("1000")
        let app = try #require(try Handlers.apps(apple).all.first)
        var policy = ConsumptionPolicy()
        policy.answer = .decline
        policy.margin = .seconds(7_200)
        let produced = Mutex<[OutboundMessage]>([])
        let answers = ConsumptionPolicyAnswers(
            apps: [(app, policy)], ledger: ledger, produce: { message in produced.withLock { $0.append(message) } },
            topic: "consumption", metrics: WorkerMetrics(), logger: Handlers.logger, holder: "replica-1")
        let now = Date()
        try await openRequest("request-1", respondBy: now.addingTimeInterval(1_800))
        await answers.round(every: .seconds(60), now: now)
        await answers.round(every: .seconds(60), now: now)
        #expect(produced.withLock { $0.count } == 1, "answered once while the flow sends it")
        // Nobody's answer reached the worker; the customer asks again, with a later deadline, within the margin.
        try await openRequest("request-2", respondBy: now.addingTimeInterval(3_600))
        await answers.round(every: .seconds(60), now: now)
        let all = produced.withLock { $0 }
        #expect(all.count == 2, "the request opened again was not answered")
        #expect(all.allSatisfy { $0.headers.contains { $0.name == "answered_by" && $0.stringValue == "policy" } })
    }

    @Test(
        "a newer answer of one transaction supersedes an older one still retrying: the older stops without a dead letter, and Apple gets the newer after the older's call in flight, never before"
    )
    func newerAnswerWins() async throws {
        try await grant("1000")
        let gated = GatedConsumption()
        let handler = try handler(consumption: nil, gated: gated, maxAttempts: 100)
        let failure = AppleVerificationError(.httpStatus, "sendConsumption: HTTP 503", isRetriable: true)
        let older = Task {
            try await Handlers.run(handler, answer(["consumption_percentage": 10]), topic: "consumption", offset: 1)
        }
        #expect(await eventually(timeout: .seconds(10)) { gated.pending == 1 })
        gated.release(.failure(failure))
        // The older answer's second call is in flight when the newer answer arrives.
        #expect(await eventually(timeout: .seconds(10)) { gated.pending == 1 && gated.bodies.count == 2 })
        let executor = CountingExecutor()
        let newer = Task(executorPreference: executor) {
            try await Handlers.run(handler, answer(["consumption_percentage": 90]), topic: "consumption", offset: 2)
        }
        // The newer answer has begun (the older, the first this handler began, is superseded) and waits: from
        // there its only waits are its turn and its call to Apple, which would be in by now.
        let olderTicket = AnswerSuccession.Ticket(transactionID: "1000", sequence: 1, place: nil)
        #expect(
            await eventually(timeout: .seconds(10)) {
                handler.succession.isSuperseded(olderTicket) && executor.isIdle
            })
        #expect(gated.bodies.count == 2, "the newer answer waits for the older's call in flight")
        gated.release(.failure(failure))
        #expect(await eventually(timeout: .seconds(10)) { gated.pending == 1 && gated.bodies.count == 3 })
        gated.release(.success(.accepted))
        let olderOutcome = try await older.value
        let newerOutcome = try await newer.value
        #expect(olderOutcome.deadLetter == nil && olderOutcome.events.isEmpty, "superseded: no dead letter")
        #expect(newerOutcome.deadLetter == nil)
        #expect(gated.bodies.map { $0.contains("consumptionPercentage\":90000") } == [false, false, true])
        // An answer older than one already handled (read late, after being parked) is superseded at once.
        let late = try await Handlers.run(
            handler, answer(["consumption_percentage": 50]), topic: "consumption", offset: 0)
        #expect(late.deadLetter == nil && gated.bodies.count == 3)
        // So is one a `dlq replay` put back later, at a newer place: it is as old as where it was first read.
        // (Were it sent, its call is answered here, so the test fails rather than waits.)
        let answerer = Task {
            while !Task.isCancelled {
                if gated.pending > 0 { gated.release(.success(.accepted)) }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        defer { answerer.cancel() }
        /// An answer a replay put back at `offset`, saying it was first read at `firstRead`.
        func replayed(_ percentage: Int, offset: Int64, firstRead: String) async throws -> Disposition {
            try await Handlers.run(
                handler, answer(["consumption_percentage": percentage]), topic: "consumption", offset: offset,
                headers: [
                    MessageHeader(name: "dlq_replayed_from", string: "dlq[0]@\(offset)"),
                    MessageHeader(name: "dlq_first_read", string: firstRead),
                ])
        }
        let replayedOlder = try await replayed(20, offset: 9, firstRead: "consumption[0]@1")
        #expect(replayedOlder.deadLetter == nil && gated.bodies.count == 3, "a replayed older answer reached Apple")
        // A place made up to look newer than the answer's own is not believed.
        let forged = try await replayed(30, offset: 0, firstRead: "consumption[0]@999999999")
        #expect(forged.deadLetter == nil && gated.bodies.count == 3, "an answer claiming a later place reached Apple")
    }
}

/// Send Consumption Information whose calls wait until the test answers each, oldest first.
final class GatedConsumption: ConsumptionSending, Sendable {
    private struct State {
        var bodies: [String] = []
        var waiting:
            [CheckedContinuation<Result<AppStoreServerAPIClient.ConsumptionDelivery, AppleVerificationError>, Never>] =
                []
    }
    private let state = Mutex(State())
    let allowsSandbox = false

    var bodies: [String] { state.withLock { $0.bodies } }
    var pending: Int { state.withLock { $0.waiting.count } }

    /// Answers the oldest call waiting.
    func release(_ result: Result<AppStoreServerAPIClient.ConsumptionDelivery, AppleVerificationError>) {
        let next = state.withLock { $0.waiting.isEmpty ? nil : $0.waiting.removeFirst() }
        next?.resume(returning: result)
    }

    func sendConsumption(transactionID: String, body: Data, environment: AppleEnvironment, attempts: inout Int)
        async throws -> AppStoreServerAPIClient.ConsumptionDelivery
    {
        attempts += 1
        let result = await withCheckedContinuation { continuation in
            state.withLock {
                $0.bodies.append(String(decoding: body, as: UTF8.self))
                $0.waiting.append(continuation)
            }
        }
        return try result.get()
    }
}
