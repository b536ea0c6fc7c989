import AppStoreSimulator
import AppleVerification
import Foundation
import HTTPClient
import Kafka
import Ledger
import Observability
import Testing
import TestSupport
import Vocabulary

@testable import ReceiptWorker
@testable import Support
import Flows

/// Support's commands on a worker's ledger and the simulator over HTTP (docs/operations.md, "Support: a player
/// says they paid"): `lookup` and `credit` as the binary runs them (``SupportDesk``), and Finish Transaction.
@Suite("Support: lookup and credit against the simulator; Finish Transaction")
struct SupportEndToEndTests {
    /// The desk of the harness's default app, on its ledger (opened as the commands open it).
    func desk<T: Sendable>(_ harness: WorkerHarness, _ body: (SupportDesk) async throws -> T) async throws -> T {
        try await desk(harness, allowSandbox: harness.configuration.apps[0].allowSandbox, body)
    }

    func credit(
        _ transactionID: String, order: String, user: String = "player-9", invoice: String? = nil, token: UUID? = nil
    ) -> SupportDesk.CreditRequest {
        SupportDesk.CreditRequest(
            transactionID: transactionID, orderID: order, userID: user, by: "agent-17", reason: "ticket 4411",
            appleOrderID: invoice, appAccountToken: token)
    }

    /// The default app's desk, with `apple.allow_sandbox` set as given.
    func desk<T: Sendable>(
        _ harness: WorkerHarness, allowSandbox: Bool, _ body: (SupportDesk) async throws -> T
    ) async throws -> T {
        var configuration = harness.configuration
        configuration.apps[0].allowSandbox = allowSandbox
        return try await configuration.withToolLedger { ledger in
            try await body(try SupportDesk.make(configuration, app: nil, ledger: ledger, logger: WorkerHarness.logger))
        }
    }

    /// Publishes a credit's event as `receipt-worker credit` does.
    func publish(_ outcome: SupportDesk.CreditDecision, _ harness: WorkerHarness) async throws -> StoredEvent? {
        guard case .credited(let event, _, _, _, _) = outcome else { return nil }
        _ = try await harness.producer.send(SupportDesk.message(event, harness.configuration))
        return event
    }

    @Test(
        "a purchase made while the app crashed: lookup by Apple's order id says paid, never claimed; credit grants it once, with who and why and its price; Apple's later notifications name the player"
    )
    func crashedPurchase() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let bought = try await harness.admin.call(
            "purchases", ["product_id": "gems_500", "price": 4990, "currency": "EUR", "storefront": "FRA"])
        let transactionID = try #require(bought["transaction_id"] as? String)
        let appleOrder = try #require(bought["order_id"] as? String)

        let before = try await desk(harness) { try await $0.lookup(.appleOrderID(appleOrder)) }
        #expect(before.summary == "paid, never claimed: credit it (receipt-worker credit)", "\(before.summary)")
        #expect(before.purchases.first?.value.price == 4990 && before.purchases.first?.value.currency == "EUR")

        // A transaction id alone proves nothing: another player could quote it. The invoice must list it.
        let unproven = try await desk(harness) { try await $0.credit(credit(transactionID, order: "shop-77")) }
        #expect(
            unproven
                == .refused(
                    "no proof the purchase is the player's: give the order id on their invoice (--apple-order-id)"))
        let other = try await harness.admin.call("purchases", ["product_id": "coins_100"])
        let wrongInvoice = try await desk(harness) {
            try await $0.credit(credit(transactionID, order: "shop-77", invoice: other["order_id"] as? String))
        }
        guard case .refused(let why) = wrongInvoice, why.contains("does not list transaction") else {
            Issue.record("another purchase's invoice was taken as proof: \(wrongInvoice)")
            return
        }
        let token = UUID()
        let outcome = try await desk(harness) {
            try await $0.credit(credit(transactionID, order: "shop-77", invoice: appleOrder, token: token))
        }
        let event = try #require(try await publish(outcome, harness), "\(outcome)")
        #expect(await eventually { !harness.events(orderID: "shop-77").isEmpty })
        let granted = try #require(harness.events(orderID: "shop-77").first)
        #expect(granted["type"] as? String == "receipt.granted" && granted["decision"] as? String == "grant")
        #expect(granted["event_id"] as? String == event.eventID && granted["user_id"] as? String == "player-9")
        #expect(granted["credited_by"] as? String == "agent-17" && granted["credit_reason"] as? String == "ticket 4411")
        #expect(granted["price"] as? Int == 4990 && granted["storefront"] as? String == "FRA")

        // The same request again is the same credit; another order is refused: never a second grant.
        guard
            case .credited(let again, _, _, _, _) = try await desk(
                harness,
                { try await $0.credit(credit(transactionID, order: "shop-77", invoice: appleOrder, token: token)) })
        else { Issue.record("the same credit again was refused"); return }
        #expect(again.eventID == event.eventID)
        for (order, user) in [("shop-78", "player-9"), ("shop-77", "player-10")] {
            let second = try await desk(harness) {
                try await $0.credit(credit(transactionID, order: order, user: user, invoice: appleOrder, token: token))
            }
            #expect(second == .refused("already held: granted to order shop-77 of player player-9"), "\(second)")
        }
        // A job presenting the purchase for another order is denied duplicate_transaction, as for any grant.
        let after = try await desk(harness) { try await $0.lookup(.orderID("shop-77")) }
        #expect(after.summary.hasPrefix("paid, granted to order shop-77 of player player-9 on "), "\(after.summary)")

        // Set App Account Token: Apple's later notifications of the purchase name the player.
        guard case .credited(_, let original, let environment, _, let setToken) = outcome else { return }
        #expect(setToken, "the purchase had no token, and the request gave the player's")
        let set = try await desk(harness) {
            try await $0.setAccountToken(token, originalTransactionID: original, environment: environment)
        }
        #expect(set == .done)
        let state = try await harness.admin.call("transactions/\(transactionID)", [:])
        #expect(state["app_account_token"] as? String == token.uuidString.lowercased(), "\(state)")

        // Run again after the broker failed: the recorded credit's event, even where a first run would now be
        // refused (its proof is not asked again: the first run's was checked, and only the event is missing)...
        let rerun = try await desk(harness) {
            try await $0.credit(
                credit(transactionID, order: "shop-77", invoice: other["order_id"] as? String, token: token))
        }
        guard case .credited(let replayed, _, _, _, let setsToken) = rerun else { Issue.record("\(rerun)"); return }
        #expect(replayed.eventID == event.eventID)
        #expect(!setsToken, "a token not proven by this run is never sent to Apple")
        // ...and once the purchase was refunded: its receipt.revoked went out for shop-77, and a grant service
        // keeps a refund that comes before its grant until the grant does (never a refund whose grant never comes).
        try await harness.admin.refund(transactionID: transactionID)
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.events(orderID: "shop-77").contains { $0["type"] as? String == "receipt.revoked" }
            })
        let afterRefund = try await desk(harness) {
            try await $0.credit(credit(transactionID, order: "shop-77", invoice: appleOrder, token: token))
        }
        guard case .credited(let republished, _, _, _, _) = afterRefund else {
            Issue.record("a recorded credit's event was not published again after its refund: \(afterRefund)")
            return
        }
        #expect(republished.eventID == event.eventID)
        await harness.stop()
    }

    @Test(
        "a lead's approval marks its hold when the credit is recorded, or was recorded before by the same request; not once another lead rejected it"
    )
    func approvalsMarkTheirHold() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let token = UUID()
        let bought = try await harness.purchase(["product_id": "coins_100", "app_account_token": token.uuidString])
        let request = credit(bought.transactionID, order: "o-held", token: token)
        try await harness.configuration.withToolLedger { ledger in
            let desk = try SupportDesk.make(
                harness.configuration, app: nil, ledger: ledger, logger: WorkerHarness.logger)
            let at = Date(timeIntervalSince1970: 1_800_000_000)
            func hold(claimedBy lead: String) async throws -> ApprovalRequest.Move {
                let id = try await ledger.requestApproval(
                    ApprovalRequest(
                        createdAt: at, app: "default", requestedBy: "agent-17", requestedName: "agent-17", ticket: "T",
                        player: "player-9", request: "{}"))
                let claim = ApprovalRequest.Decision(status: .approving, by: lead, byName: lead, at: at, outcome: "")
                #expect(try await ledger.decideApproval(id: id, from: .pending, to: claim))
                return ApprovalRequest.Move(id: id, claim: claim)
            }
            func approve(_ move: ApprovalRequest.Move) async throws -> SupportDesk.CreditResult {
                try await desk.credit(request, approval: move) { _ in
                    AuditEntry(
                        at: at, app: "default", agent: move.claim.by, agentName: move.claim.by, role: "lead",
                        action: "approve", outcome: "credited", ticket: "T", player: "player-9", request: "{}",
                        answer: "{}")
                }
            }
            // Credited: the hold marked in the credit's own transaction.
            let first = try await hold(claimedBy: "lee")
            guard case .done(.credited) = try await approve(first) else {
                Issue.record("the approved credit was not credited")
                return
            }
            #expect(try await ledger.approvalRequest(id: first.id)?.isRecorded == true)
            // The same request held again: recorded before, its event published again, its hold marked too.
            let second = try await hold(claimedBy: "lee")
            guard case .done(.credited) = try await approve(second) else {
                Issue.record("the request recorded before was not answered with its event")
                return
            }
            #expect(try await ledger.approvalRequest(id: second.id)?.isRecorded == true)
            // Rejected while its lead was slow: nothing published for it, no line written.
            let third = try await hold(claimedBy: "lee")
            let rejection = ApprovalRequest.Decision(
                status: .rejected, by: "lou", byName: "lou", at: at.addingTimeInterval(600), outcome: "")
            #expect(
                try await ledger.decideApproval(
                    id: third.id, from: .unrecordedStalledBefore(at.addingTimeInterval(1)), to: rejection))
            let lines = try await ledger.audit(AuditFilter()).count
            #expect(try await approve(third) == .approvalTaken)
            #expect(try await ledger.audit(AuditFilter()).count == lines)
            #expect(try await ledger.approvalRequest(id: third.id)?.status == .rejected)
        }
        await harness.stop()
    }

    @Test(
        "a credit recorded while Sandbox was accepted, asked again once it is not: its event again from the ledger, its token not set and no Sandbox endpoint called; another order for the purchase is refused"
    )
    func recordedBeforeAppleRefuses() async throws {
        let harness = try await WorkerHarness(notifications: true)
        // The player's token on the purchase: a Sandbox purchase has no Production invoice to prove it.
        let token = UUID()
        let sandbox = try await harness.purchase(
            ["product_id": "coins_100", "environment": "Sandbox", "app_account_token": token.uuidString])
        let request = credit(sandbox.transactionID, order: "o-tester", token: token)
        guard
            case .credited(let first, _, .sandbox, _, _) = try await desk(
                harness, allowSandbox: true, { try await $0.credit(request) })
        else {
            Issue.record("a Sandbox purchase was not credited with Sandbox accepted")
            return
        }
        // Sandbox turned off since (a lead taking over the approval that recorded it, the agent's run again): the desk
        // asks Apple's Production, which knows no such transaction, and the event the ledger holds goes out all the same.
        let again = try await desk(harness, allowSandbox: false) { try await $0.credit(request) }
        guard case .credited(let event, let original, let environment, let note, let setToken) = again else {
            Issue.record("the credit recorded before was refused: \(again)")
            return
        }
        #expect(event == first, "the same event, byte for byte")
        #expect(original == sandbox.transactionID && environment == .sandbox && !setToken)
        let unknown = "Apple knows no transaction \(sandbox.transactionID) of this app: not this app's"
        #expect(note.hasPrefix(SupportDesk.repeatedCredit) && note.contains(unknown), "\(note)")
        #expect(note.hasSuffix("the player's app account token is not set at Apple"), "\(note)")
        // Finishing it (apple.finish_transactions) calls no Sandbox endpoint where Sandbox is not accepted.
        let callsBefore = try await harness.admin.appleRequests()
        let finished = try await desk(harness, allowSandbox: false) {
            try await $0.finish(transactionID: sandbox.transactionID, environment: environment)
        }
        let callsAfter = try await harness.admin.appleRequests()
        #expect(finished == .notFound && callsAfter == callsBefore)
        // Any other request for that purchase is refused, as before.
        let other = try await desk(harness, allowSandbox: false) {
            try await $0.credit(credit(sandbox.transactionID, order: "o-other", token: token))
        }
        #expect(other == .refused(unknown))
        await harness.stop()
    }

    @Test(
        "hostile and refused: another app's order and transaction are not this app's; an order id that is a path is never sent; a refunded purchase is refused; a Sandbox purchase in production is never credited"
    )
    func refusals() async throws {
        let harness = try await WorkerHarness(notifications: true)
        try await harness.admin.addApp(["bundle_id": "com.other.game", "app_apple_id": 99])
        let theirs = try await harness.admin.call(
            "purchases", ["product_id": "gems_500", "bundle_id": "com.other.game"])
        let theirOrder = try #require(theirs["order_id"] as? String)
        let theirID = try #require(theirs["transaction_id"] as? String)
        let other = try await desk(harness) { try await $0.lookup(.appleOrderID(theirOrder)) }
        #expect(other.purchases.isEmpty && other.summary.contains("not this app's"), "\(other.summary)")
        let refusedOther = try await desk(harness) { try await $0.credit(credit(theirID, order: "o-1")) }
        #expect(refusedOther == .refused("Apple knows no transaction \(theirID) of this app: not this app's"))

        // A purchase that names a player by its token is credited only with that player's token.
        let tokened = try await harness.purchase(["product_id": "coins_100", "app_account_token": UUID().uuidString])
        let wrongToken = try await desk(harness) {
            try await $0.credit(credit(tokened.transactionID, order: "o-4", token: UUID()))
        }
        #expect(wrongToken == .refused("the purchase's app account token is not this player's: not theirs to credit"))

        let requestsBefore = try await harness.admin.appleRequests()
        let path = try await desk(harness) { try await $0.lookup(.appleOrderID("../../admin/faults")) }
        let requestsAfter = try await harness.admin.appleRequests()
        #expect(path.purchases.isEmpty && requestsAfter == requestsBefore)

        let refunded = try await harness.purchase(["product_id": "coins_100"])
        try await harness.admin.refund(transactionID: refunded.transactionID)
        let lookup = try await desk(harness) { try await $0.lookup(.transactionID(refunded.transactionID)) }
        #expect(lookup.summary.hasPrefix("refunded on "), "\(lookup.summary)")
        let refusedRefund = try await desk(harness) {
            try await $0.credit(credit(refunded.transactionID, order: "o-2"))
        }
        guard case .refused(let why) = refusedRefund else { Issue.record("a refunded purchase was credited"); return }
        #expect(why.hasPrefix("refunded or revoked on "))

        let sandbox = try await harness.purchase(["product_id": "coins_100", "environment": "Sandbox"])
        let sandboxLookup = try await desk(harness) { try await $0.lookup(.transactionID(sandbox.transactionID)) }
        #expect(sandboxLookup.purchases.isEmpty && sandboxLookup.summary.contains("Sandbox is not looked up"))
        let refusedSandbox = try await desk(harness) {
            try await $0.credit(credit(sandbox.transactionID, order: "o-3"))
        }
        guard case .refused = refusedSandbox else { Issue.record("a Sandbox purchase was credited"); return }
        // A Sandbox grant the ledger holds from when Sandbox was accepted: shown as the ledger holds it (an order
        // granted a tester's purchase is what support must see), never asked of Apple.
        try await harness.configuration.withToolLedger { ledger in
            let grant = GrantClaim(
                orderID: "o-tester", transactionID: sandbox.transactionID, purchaseID: nil, environment: .sandbox,
                userID: "tester-1", productID: "coins_100", quantity: 1)
            let event = StoredEvent(
                eventID: "e-tester", type: "receipt.granted", time: "", key: "o-tester", json: Array("{}".utf8))
            _ = try await ledger.record(
                Decision(
                    key: DecisionKey(app: .defaultApp, jobID: "tester", fingerprint: "f"), grant: grant, event: event))
        }
        let callsBefore = try await harness.admin.appleRequests()
        let tester = try await desk(harness) { try await $0.lookup(.orderID("o-tester")) }
        #expect(try await harness.admin.appleRequests() == callsBefore)
        #expect(tester.purchases.count == 1 && tester.purchases.first?.askedApple == false)
        #expect(
            tester.summary.hasPrefix(
                "Sandbox: a tester's purchase, no money paid, granted here to order o-tester of player tester-1"),
            "\(tester.summary)")
        // Nothing refused was recorded: the orders hold nothing.
        for order in ["o-1", "o-2", "o-3"] {
            let held = try await desk(harness) { try await $0.lookup(.orderID(order)) }
            #expect(held.purchases.isEmpty, "\(order): \(held.summary)")
        }
        await harness.stop()
    }

    @Test(
        "an order id starting unclaimed: is refused before Apple is asked: that order is a credit's, never support's to name"
    )
    func reservedOrder() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let bought = try await harness.purchase(["product_id": "coins_100"])
        let asked = try await harness.admin.appleRequests()
        let refused = try await desk(harness) {
            try await $0.credit(credit(bought.transactionID, order: "unclaimed:\(bought.transactionID)"))
        }
        guard case .refused(let why) = refused else {
            Issue.record("credited for a reserved order id: \(refused)")
            return
        }
        #expect(why.contains("reserved for purchases credited unclaimed"))
        #expect(try await harness.admin.appleRequests() == asked, "Apple was asked")
        let held = try await desk(harness) { try await $0.lookup(.orderID("unclaimed:\(bought.transactionID)")) }
        #expect(held.purchases.isEmpty, "nothing recorded")
        await harness.stop()
    }

    @Test(
        "Apple answering 429 and 5xx: lookup and credit wait it out as a job does; Apple down throughout throws, recording nothing"
    )
    func appleBadDay() async throws {
        // Enough calls that the random backoff outlasts a 0.3 s outage (eight could sum to less), and fewer than
        // the circuit breaker's 20, so it never opens.
        let harness = try await WorkerHarness(maxAttempts: 16, notifications: true)
        let bought = try await harness.purchase(["product_id": "coins_100"])
        for mode in ["http_5xx", "rate_limited"] {
            try await harness.faults(["outage_start_in_ms": 0, "outage_seconds": 0.3, "outage_mode": mode])
            let report = try await desk(harness) { try await $0.lookup(.transactionID(bought.transactionID)) }
            #expect(report.purchases.count == 1, "\(mode): \(report.summary)")
        }
        try await harness.faults(["error_rate": 1.0, "error_status": 503])
        await #expect(throws: AppleVerificationError.self) {
            _ = try await desk(harness) { try await $0.credit(credit(bought.transactionID, order: "o-down")) }
        }
        try await harness.faults([:])
        let held = try await desk(harness) { try await $0.lookup(.orderID("o-down")) }
        #expect(held.purchases.isEmpty)
        await harness.stop()
    }

    @Test(
        "a subscription's first invoice after its period ended: lookup follows it to the paid period granted since, not 'nothing to credit'"
    )
    func endedPeriodFollowed() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let first = try await harness.purchase(["product_id": "vip_monthly", "type": "subscription"])
        try await harness.submit(
            job("job-vip", order: "vip-7", product: "vip_monthly", ["signed_transaction": first.signedTransaction]))
        #expect(await harness.result(jobID: "job-vip")?["decision"] as? String == "grant")
        let renewed = try await harness.admin.call(
            "renew", ["transaction_id": first.transactionID, "period_seconds": 2_592_000])
        let period = try #require(renewed["transaction_id"] as? String)
        #expect(
            await eventually(timeout: .seconds(60)) {
                harness.events(orderID: "vip-7").contains { $0["type"] as? String == "receipt.renewed" }
            })
        // Asked once the first period (30 days) has ended.
        let later = Date(timeIntervalSinceNow: 31 * 86_400)
        let report = try await desk(harness) { try await $0.lookup(.transactionID(first.transactionID), now: later) }
        #expect(report.purchases.map(\.transactionID) == [first.transactionID, period], "\(report.summary)")
        #expect(report.purchases.first?.verdict.contains("its latest period is transaction \(period) (below)") == true)
        #expect(report.purchases.last?.verdict.hasPrefix("paid, granted to order vip-7") == true)
        await harness.stop()
    }

    @Test(
        "credit run again after Apple did not set the token: the rerun checks the proof again and sets it (never a replay that forgets it)"
    )
    func tokenSetOnRerun() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let bought = try await harness.admin.call("purchases", ["product_id": "gems_500"])
        let transactionID = try #require(bought["transaction_id"] as? String)
        let invoice = try #require(bought["order_id"] as? String)
        let token = UUID()
        let request = credit(transactionID, order: "shop-12", invoice: invoice, token: token)
        guard
            case .credited(let first, _, _, _, let setToken) = try await desk(harness, { try await $0.credit(request) })
        else {
            Issue.record("not credited")
            return
        }
        #expect(setToken, "the first run sets the token")
        // Set App Account Token failed (Apple down): the command said run it again. The rerun:
        guard
            case .credited(let again, let original, let environment, _, let setAgain) = try await desk(
                harness, { try await $0.credit(request) })
        else {
            Issue.record("the rerun was refused")
            return
        }
        #expect(again.eventID == first.eventID && setAgain, "the same event, and the token is set this time")
        let set = try await desk(harness) {
            try await $0.setAccountToken(token, originalTransactionID: original, environment: environment)
        }
        #expect(set == .done)
        let after = try await desk(harness) { try await $0.lookup(.transactionID(transactionID)) }
        #expect(after.purchases.first?.appAccountToken == LookupReport.masked(token.uuidString.lowercased()))
        // A rerun with another token is no proof: the purchase carries the player's now.
        let stranger = credit(transactionID, order: "shop-12", invoice: invoice, token: UUID())
        guard case .credited(_, _, _, _, let setStranger) = try await desk(harness, { try await $0.credit(stranger) })
        else { return }
        #expect(!setStranger)
        await harness.stop()
    }

    @Test("a purchase credited unclaimed is tied to the order support names, with the credit's event id: one credit")
    func unclaimedCreditTied() async throws {
        let harness = try await WorkerHarness(notifications: true) { $0.unclaimedAfter = .seconds(1) }
        let bought = try await harness.admin.call("purchases", ["product_id": "gems_500", "notify": true])
        let lost = (
            transactionID: try #require(bought["transaction_id"] as? String), invoice: bought["order_id"] as? String
        )
        #expect(await eventually { !harness.events(orderID: "unclaimed:\(lost.transactionID)").isEmpty })
        let credit = try #require(harness.events(orderID: "unclaimed:\(lost.transactionID)").first)
        let lookup = try await desk(harness) { try await $0.lookup(.transactionID(lost.transactionID)) }
        #expect(lookup.summary.hasPrefix("paid, never claimed: credited unclaimed on "), "\(lookup.summary)")
        let outcome = try await desk(harness) {
            try await $0.credit(self.credit(lost.transactionID, order: "shop-90", invoice: lost.invoice))
        }
        guard case .credited(let tied, _, _, _, _) = outcome else { Issue.record("\(outcome)"); return }
        #expect(tied.eventID == credit["event_id"] as? String)
        await harness.stop()
    }

    @Test(
        "apple.finish_transactions: a grant published is finished at Apple; Apple failing never changes the decision, and is counted"
    )
    func finishTransactions() async throws {
        let harness = try await WorkerHarness(notifications: true) { $0.apple.finishTransactions = true }
        let bought = try await harness.purchase(["product_id": "coins_100"])
        try await harness.submit(
            job("job-f1", order: "f1", product: "coins_100", ["signed_transaction": bought.signedTransaction]))
        #expect(await harness.result(jobID: "job-f1")?["decision"] as? String == "grant")
        #expect(
            await eventually {
                ((try? await harness.admin.call("transactions/\(bought.transactionID)", [:]))?["finished"] as? Bool)
                    == true
            })
        // Apple down: the grant is published all the same; the finish is given up after its calls, counted.
        try await harness.faults(["error_rate": 1.0, "error_status": 503])
        let next = try await harness.purchase(["product_id": "coins_100"])
        try await harness.submit(
            job("job-f2", order: "f2", product: "coins_100", ["signed_transaction": next.signedTransaction]))
        #expect(await harness.result(jobID: "job-f2")?["decision"] as? String == "grant")
        let metrics = harness.worker.metrics.registry
        #expect(
            await eventually {
                metrics.render().contains(
                    #"receipt_worker_finish_transactions_total{app="default",outcome="failed"} 1"#)
            }, "\(metrics.render().split(separator: "\n").filter { $0.contains("finish") })")
        #expect(
            metrics.render().contains(#"receipt_worker_finish_transactions_total{app="default",outcome="finished"} 1"#))
        await harness.stop()
    }

    func tool(_ harness: WorkerHarness, _ arguments: [String]) async throws -> CommandLineRun {
        try await harness.supportTool(arguments)
    }

    @Test(
        "the binary: lookup --json and credit of a purchase made while the app crashed; no proof is a usage error, a second order is refused, a made-up id is not found"
    )
    func commands() async throws {
        let harness = try await WorkerHarness(notifications: true)
        let bought = try await harness.admin.call("purchases", ["product_id": "gems_500", "price": 4990])
        let transactionID = try #require(bought["transaction_id"] as? String)
        let invoice = try #require(bought["order_id"] as? String)
        let lookup = try await tool(harness, ["lookup", "--by", "support-ana", "--apple-order-id", invoice, "--json"])
        #expect(lookup.status == 0, "\(lookup.errors)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(lookup.output.utf8)) as? [String: Any])
        #expect(report["summary"] as? String == "paid, never claimed: credit it (receipt-worker credit)")
        #expect(!lookup.output.contains(".ey"), "no signed data in the output")

        let common = [
            "credit", "--transaction-id", transactionID, "--user-id", "player-5", "--by", "agent", "--reason", "r",
        ]
        let unproven = try await tool(harness, common + ["--order-id", "cli-1"])
        #expect(unproven.status == 2 && unproven.errors.contains("--apple-order-id"), "\(unproven.errors)")
        let credited = try await tool(harness, common + ["--order-id", "cli-1", "--apple-order-id", invoice])
        #expect(credited.status == 0 && credited.output.contains("credited to order cli-1"), "\(credited.errors)")
        #expect(await eventually { harness.events(orderID: "cli-1").first?["credited_by"] as? String == "agent" })
        let twice = try await tool(harness, common + ["--order-id", "cli-2", "--apple-order-id", invoice])
        #expect(twice.status == 3 && twice.errors.contains("already held: granted to order cli-1"), "\(twice.errors)")

        let madeUp = try await tool(harness, ["lookup", "--by", "support-ana", "--transaction-id", "1999999999999999"])
        #expect(madeUp.status == 3 && madeUp.output.contains("Apple knows no transaction 1999999999999999"))
        await harness.stop()
    }
}

extension WorkerHarness {
    /// Waits (a minute at most) until the ledger holds `count` purchases Apple reported with `token` that no job
    /// claimed yet: a notification's report, taken by the worker.
    func reportsWaiting(token: String, count: Int) async -> Bool {
        await eventually(timeout: .seconds(60)) {
            let waiting = try? await configuration.withToolLedger { ledger in
                try await ledger.reportedTransactions(appAccountToken: token, app: .defaultApp)
            }
            return waiting?.count == count
        }
    }

    /// `receipt-worker lookup` and `credit` as support runs them: the binary, on this harness's ledger (or
    /// `ledgerURL`), broker and simulator, configured by flags.
    /// `overriding`: settings applied after the harness's (a broker that does not answer).
    func supportTool(
        _ arguments: [String], ledgerURL: String? = nil, environment: [String: String] = [:],
        overriding: [String] = []
    ) async throws -> CommandLineRun {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("support-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let root = directory.appendingPathComponent("root.pem")
        try Data(AppStoreSimulator.testRootPEM.utf8).write(to: root)
        let key = MetricsEndpointTests.repositoryRoot.appendingPathComponent("Tests/AppleClientTests/testSigningKey.p8")
        let settings = [
            "apple.bundle_id=com.example", "apple.root_certificates=\(root.path)",
            "apple.app_apple_id=\(configuration.defaultApp.appAppleID ?? 0)", "apple.api.key_id=keyId",
            "apple.api.issuer_id=issuerId", "apple.api.private_key_file=\(key.path)",
            "apple.api.production_url=\(configuration.apple.apiProductionURL)",
            "apple.api.sandbox_url=\(configuration.apple.apiSandboxURL)", "apple.allow_insecure_urls=true",
            "ledger.url=\(ledgerURL ?? configuration.ledgerURL)", "topics.results=\(configuration.topics.results)",
            "kafka.bootstrap.servers=\(WorkerHarness.bootstrap)", "retry.initial_backoff_ms=20",
            "retry.max_backoff_ms=200",
        ]
        return try await CommandLineRun.run(
            arguments + (settings + overriding).flatMap { ["--set", $0] }, environment: environment)
    }
}

extension SupportDesk {
    /// A credit as the command line makes one (no caps), its audit line under `--by`.
    func credit(_ request: CreditRequest) async throws -> CreditDecision {
        let result = try await credit(request) { outcome in
            let isCredited = if case .credited = outcome { true } else { false }
            return AuditEntry(
                at: Date(), app: "default", agent: "cli:" + request.by, agentName: request.by, role: "operator",
                action: "credit", outcome: isCredited ? "credited" : "refused", ticket: "-", player: request.userID,
                request: "{}", answer: "{}")
        }
        guard case .done(let outcome) = result else { throw TestSupportError("a credit without caps was over one") }
        return outcome
    }
}
