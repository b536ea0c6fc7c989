import Foundation
import TestSupport
import Testing
import Vocabulary

@testable import Ledger

/// Subscriptions' periods and purchases no job claimed, on both ledgers (``PurchaseRules``): what each
/// database must hold for the rules to be the same, under concurrency too, and after the upgrade.
@Suite("Subscriptions and unclaimed purchases in the ledger, SQLite and PostgreSQL", .timeLimit(.minutes(1)))
struct PurchaseLifeLedgerTests {
    static let at = Date(timeIntervalSince1970: 1_790_000_000)

    static func grantEvent(order: String, transaction: String, original: String) -> Data {
        Data(
            (#"{"decision":"grant","event_id":"g-\#(order)","order_id":"\#(order)","transaction_id":"\#(transaction)","#
                + #""original_transaction_id":"\#(original)"}"#).utf8)
    }

    static func state(at date: Date, status: SubscriptionStatus = .active, expires: Date? = nil) -> SubscriptionState {
        SubscriptionState(
            status: status, expiresAt: expires, gracePeriodExpiresAt: nil, autoRenew: true,
            autoRenewProductID: "vip", changedAt: date)
    }

    static func renewal(_ id: String, original: String, line: String, at date: Date) -> NotificationChange {
        NotificationChange(
            id: "n-\(id)-\(date.timeIntervalSince1970)", app: .defaultApp, environment: .production,
            kind: .subscription(
                SubscriptionChange(
                    originalTransactionID: original, state: state(at: date, expires: date.addingTimeInterval(86_400)),
                    renewal: .init(
                        purchaseID: .billingPeriod(webOrderLineItemID: "\(line)"), transactionID: id, productID: "vip",
                        quantity: 1,
                        eventID: "renewal-\(line)"))))
    }

    /// The event a change publishes: its holder's order, and the state, as `order|status|expires`.
    static func applied(_ ledger: any Ledger, _ change: NotificationChange) async throws -> String? {
        let record = try await ledger.apply(change) { holder in
            let expires = holder.subscription?.expiresAt.map { String(Int($0.timeIntervalSince1970)) } ?? "-"
            let text = "\(holder.grant.orderID)|\(holder.subscription?.status.rawValue ?? "-")|\(expires)"
            return StoredEvent(
                eventID: change.id, type: "t", time: "", key: holder.grant.orderID, json: Array(text.utf8))
        }
        switch record {
        case .recorded(let event, _), .replay(let event): return event.map { String(decoding: $0.json, as: UTF8.self) }
        }
    }

    static func reported(_ id: String, due: Date) -> NotificationChange {
        NotificationChange(
            id: "report-\(id)", app: .defaultApp, environment: .production,
            kind: .purchased(
                ReportedPurchase(
                    purchaseID: .transaction(id), transactionID: id, originalTransactionID: id, productID: "gems",
                    quantity: 1,
                    dueAt: due,
                    event: StoredEvent(
                        eventID: "credit-\(id)", type: "receipt.unclaimed", time: "", key: "unclaimed:\(id)",
                        json: Array("{}".utf8)))))
    }

    /// A job's claim as the worker makes it, answering a credit its order holds or takes with the credit's id.
    static func claim(_ ledger: any Ledger, job: String, order: String, transaction: String) async throws
        -> ClaimVerdict
    {
        try await ledger.record(
            Decision(
                key: DecisionKey(app: .defaultApp, jobID: job, fingerprint: "f"),
                grant: GrantClaim(orderID: order, transactionID: transaction, userID: "player-\(order)"),
                event: StoredEvent(eventID: "e-\(job)", type: "receipt.granted", time: "", key: order, json: []),
                creditAnswer: { id, _ in
                    StoredEvent(eventID: id, type: "receipt.granted", time: "", key: order, json: Array("tied".utf8))
                }))
    }

    @Test(
        "a renewal is credited to the subscription's order; a stale change publishes nothing",
        arguments: Backend.allCases)
    func renewals(backend: Backend) async throws {
        let ledger = try await backend.open()
        let first = LedgerClaim.grant(
            orderID: "vip-1", transactionID: "100", purchaseID: .billingPeriod(webOrderLineItemID: "L1"))
        #expect(
            try await ledger.record(
                jobID: "j1", claim: first, event: Self.grantEvent(order: "vip-1", transaction: "100", original: "100"))
                == .recorded)
        let renewed = try await Self.applied(ledger, Self.renewal("101", original: "100", line: "L2", at: Self.at))
        #expect(renewed == "vip-1|active|\(Int(Self.at.timeIntervalSince1970) + 86_400)")
        // The period presented by a job for another order, and for the subscription's own.
        let other = LedgerClaim.grant(
            orderID: "other", transactionID: "101", purchaseID: .billingPeriod(webOrderLineItemID: "L2"))
        #expect(try await ledger.record(jobID: "j2", claim: other, event: Data("{}".utf8)) == .duplicateTransaction)
        let own = LedgerClaim.grant(
            orderID: "vip-1", transactionID: "101", purchaseID: .billingPeriod(webOrderLineItemID: "L2"))
        #expect(
            try await ledger.record(jobID: "j3", claim: own, event: Data("{}".utf8)) == .credited("renewal-L2"),
            "the period's credit, not a grant of its own")
        // A new purchase for the order is still refused: renewals are not the order's job grants.
        let third = LedgerClaim.grant(orderID: "vip-1", transactionID: "555", purchaseID: .transaction("555"))
        #expect(try await ledger.record(jobID: "j4", claim: third, event: Data("{}".utf8)) == .orderAlreadyFulfilled)
        // A change signed before the renewal: nothing; one after it: the newest state.
        let stale = NotificationChange(
            id: "stale", app: .defaultApp, environment: .production,
            kind: .subscription(
                SubscriptionChange(
                    originalTransactionID: "100",
                    state: Self.state(at: Self.at.addingTimeInterval(-5), status: .expired),
                    renewal: nil)))
        #expect(try await Self.applied(ledger, stale) == nil)
        let newer = NotificationChange(
            id: "newer", app: .defaultApp, environment: .production,
            kind: .subscription(
                SubscriptionChange(
                    originalTransactionID: "100",
                    state: Self.state(at: Self.at.addingTimeInterval(5), status: .expired),
                    renewal: nil)))
        #expect(
            try await Self.applied(ledger, newer) == "vip-1|expired|\(Int(Self.at.timeIntervalSince1970) + 86_400)",
            "the expiry a renewal gave is kept")
        await ledger.close()
    }

    @Test(
        "a period a job (or support) granted before its renewal was heard of is not credited again by the renewal; the next period is",
        arguments: Backend.allCases)
    func periodGrantedFirst(backend: Backend) async throws {
        let ledger = try await backend.open()
        // No grant of the original purchase: the player's client presented the current period first.
        let period = LedgerClaim.grant(
            orderID: "shop-7", transactionID: "201", purchaseID: .billingPeriod(webOrderLineItemID: "R1"),
            originalTransactionID: "200")
        #expect(
            try await ledger.record(
                jobID: "j-201", claim: period,
                event: Self.grantEvent(order: "shop-7", transaction: "201", original: "200"))
                == .recorded)
        // Apple's DID_RENEW of that same period arrives late: the order was credited by the job's grant event.
        #expect(
            try await Self.applied(ledger, Self.renewal("201", original: "200", line: "R1", at: Self.at)) == nil,
            "a second credit of the period")
        // The next period is a purchase of its own, credited to the order that holds the subscription.
        let next = Self.at.addingTimeInterval(86_400)
        #expect(
            try await Self.applied(ledger, Self.renewal("202", original: "200", line: "R2", at: next))
                == "shop-7|active|\(Int(next.timeIntervalSince1970) + 86_400)")
        // Apple delivers that renewal again (a retry under a new id, a backfill): no second credit, nothing new.
        let again = NotificationChange(
            id: "again-202", app: .defaultApp, environment: .production,
            kind: Self.renewal("202", original: "200", line: "R2", at: next).kind)
        #expect(try await Self.applied(ledger, again) == nil)
        await ledger.close()
    }

    @Test(
        "a credit is made once, published until acknowledged, and tied to exactly one of 20 racing orders",
        arguments: Backend.allCases)
    func unclaimedCredits(backend: Backend) async throws {
        let ledger = try await backend.open()
        _ = try await Self.applied(ledger, Self.reported("900", due: Self.at))
        #expect(try await ledger.creditUnclaimed(now: Self.at.addingTimeInterval(-1), limit: 10).isEmpty)
        let credits = try await ledger.creditUnclaimed(now: Self.at, limit: 10)
        #expect(credits.map(\.eventID) == ["credit-900"])
        #expect(try await ledger.creditUnclaimed(now: Self.at, limit: 10).map(\.eventID) == ["credit-900"])
        try await ledger.markCreditsPublished(eventIDs: ["credit-900"])
        #expect(try await ledger.creditUnclaimed(now: Self.at, limit: 10).isEmpty)
        // The credit holds the purchase: a plain grant meets it as another order's.
        let plain = LedgerClaim.grant(orderID: "o-1", transactionID: "900")
        #expect(try await ledger.record(jobID: "plain", claim: plain, event: Data("{}".utf8)) == .duplicateTransaction)
        let claims = try await withThrowingTaskGroup(of: ClaimVerdict?.self) { group in
            for order in 0..<20 {
                group.addTask {
                    for _ in 0..<50 {
                        if let claim = try? await Self.claim(
                            ledger, job: "j\(order)", order: "o\(order)", transaction: "900")
                        {
                            return claim
                        }
                        try await Task.sleep(for: .milliseconds(20))
                    }
                    return nil
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let tied = claims.compactMap { claim -> String? in
            if case .tied(let event)? = claim { event.eventID } else { nil }
        }
        #expect(tied == ["credit-900"])
        #expect(claims.filter { $0 == .duplicateTransaction }.count == 19)
        await ledger.close()
    }

    @Test(
        "a tied credit answers its order's later jobs with the credit's id; a refunded credit is never tied; a period refunded before its renewal credited once the refund is reversed",
        arguments: Backend.allCases)
    func tiesAndRefunds(backend: Backend) async throws {
        let ledger = try await backend.open()
        _ = try await Self.applied(ledger, Self.reported("950", due: Self.at))
        _ = try await ledger.creditUnclaimed(now: Self.at, limit: 10)
        guard case .tied = try await Self.claim(ledger, job: "first", order: "shop-1", transaction: "950") else {
            Issue.record("not tied")
            return
        }
        // The order service retries under a new job id: the credit again, never a grant of its own.
        let retry = LedgerClaim.grant(orderID: "shop-1", transactionID: "950")
        #expect(
            try await ledger.record(jobID: "retry", claim: retry, event: Data("{}".utf8)) == .credited("credit-950"))
        // A credit refunded before any job came: the job is told revoked, not tied.
        _ = try await Self.applied(ledger, Self.reported("951", due: Self.at))
        _ = try await ledger.creditUnclaimed(now: Self.at, limit: 10)
        let refund = NotificationChange(
            id: "refund-951", app: .defaultApp, environment: .production,
            kind: .revoke(purchaseID: .transaction("951"), transactionID: "951", at: Self.at))
        _ = try await Self.applied(ledger, refund)
        #expect(try await Self.claim(ledger, job: "late", order: "shop-2", transaction: "951") == .revoked)
        // A period refunded before its renewal was heard of: no credit, no event; a job presenting it: revoked.
        let first = LedgerClaim.grant(
            orderID: "vip-9", transactionID: "960", purchaseID: .billingPeriod(webOrderLineItemID: "S1"))
        _ = try await ledger.record(
            jobID: "vip", claim: first, event: Self.grantEvent(order: "vip-9", transaction: "960", original: "960"))
        let early = NotificationChange(
            id: "refund-961", app: .defaultApp, environment: .production,
            kind: .revoke(purchaseID: .billingPeriod(webOrderLineItemID: "S2"), transactionID: "961", at: Self.at))
        _ = try await Self.applied(ledger, early)
        #expect(try await Self.applied(ledger, Self.renewal("961", original: "960", line: "S2", at: Self.at)) == nil)
        let period = LedgerClaim.grant(
            orderID: "vip-9", transactionID: "961", purchaseID: .billingPeriod(webOrderLineItemID: "S2"))
        #expect(try await ledger.record(jobID: "p", claim: period, event: Data("{}".utf8)) == .revoked)
        // The refund reversed: the player paid for the period after all. Credited to the subscription's order as its
        // renewal would have been, once; the job presenting it then is answered with that credit.
        let later = Self.at.addingTimeInterval(60)
        guard case .subscription(let renewed) = Self.renewal("961", original: "960", line: "S2", at: later).kind else {
            return
        }
        let reversal = NotificationChange(
            id: "reversal-961", app: .defaultApp, environment: .production,
            kind: .reinstate(
                purchaseID: .billingPeriod(webOrderLineItemID: "S2"), transactionID: "961", at: later, period: renewed))
        #expect(try await Self.applied(ledger, reversal) == "vip-9|active|\(Int(later.timeIntervalSince1970) + 86_400)")
        #expect(try await ledger.record(jobID: "p2", claim: period, event: Data("{}".utf8)) == .credited("renewal-S2"))
        #expect(try await Self.applied(ledger, Self.renewal("961", original: "960", line: "S2", at: later)) == nil)
        await ledger.close()
    }

    @Test(
        "two jobs of one order racing to a credited purchase: the one whose claim comes second gets the same credit, never duplicate_transaction for its own order",
        arguments: Backend.allCases)
    func sameOrderRace(backend: Backend) async throws {
        let ledger = try await backend.open()
        _ = try await Self.applied(ledger, Self.reported("970", due: Self.at))
        _ = try await ledger.creditUnclaimed(now: Self.at, limit: 10)
        // Both jobs' grants met the credit as another order's before either claimed it.
        let first = LedgerClaim.grant(orderID: "shop-7", transactionID: "970")
        #expect(try await ledger.record(jobID: "a", claim: first, event: Data("{}".utf8)) == .duplicateTransaction)
        #expect(try await ledger.record(jobID: "b", claim: first, event: Data("{}".utf8)) == .duplicateTransaction)
        guard case .tied(let tied) = try await Self.claim(ledger, job: "a", order: "shop-7", transaction: "970") else {
            Issue.record("not tied")
            return
        }
        #expect(tied.eventID == "credit-970")
        #expect(try await Self.claim(ledger, job: "b", order: "shop-7", transaction: "970") == .tied(tied))
        // Another order is still refused.
        #expect(try await Self.claim(ledger, job: "c", order: "shop-8", transaction: "970") == .duplicateTransaction)
        await ledger.close()
    }

    @Test("two replicas crediting at once credit each purchase once", arguments: [Backend.postgresql])
    func concurrentRounds(backend: Backend) async throws {
        let url = try makePostgresDatabase()
        let first = try await LedgerFactory.open(url: url, poolSize: 4)
        let second = try await LedgerFactory.open(url: url, poolSize: 4)
        for id in 0..<40 { _ = try await Self.applied(first, Self.reported("\(1000 + id)", due: Self.at)) }
        async let a = first.creditUnclaimed(now: Self.at, limit: 100)
        async let b = second.creditUnclaimed(now: Self.at, limit: 100)
        let (fromA, fromB) = try await (a, b)
        #expect(Set(fromA.map(\.eventID) + fromB.map(\.eventID)).count == 40)
        #expect(try await first.waitingUnclaimed() == 0)
        for id in 0..<40 {
            let plain = LedgerClaim.grant(orderID: "x\(id)", transactionID: "\(1000 + id)")
            #expect(
                try await first.record(jobID: "x\(id)", claim: plain, event: Data("{}".utf8)) == .duplicateTransaction)
        }
        await first.close()
        await second.close()
    }
}
