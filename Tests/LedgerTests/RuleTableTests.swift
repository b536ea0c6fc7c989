import Foundation
import TestSupport
import Testing
import Vocabulary

@testable import Ledger

/// Every row of the claim table and of the notification table (``ClaimRules``, ``PurchaseRules``), run on both
/// ledgers: each row's steps on a fresh SQLite and a fresh PostgreSQL ledger, each step's outcome written as a
/// word, and the lists must be the row's, step by step. The rules live in one place; these rows are the dialects'
/// conformance test: their SQL gives the rules the same facts. A third run takes PostgreSQL with the claim and a
/// notification's facts read and written statement by statement (``ClaimStatements``, as SQLite runs them), so the
/// server functions PostgreSQL runs instead are held to the same statements.
@Suite("One rule set on both ledgers: the claim and notification tables", .timeLimit(.minutes(2)))
struct RuleTableTests {
    static let at = Date(timeIntervalSince1970: 1_790_000_000)

    /// One step of a row, and the outcome it must have.
    struct Step: Sendable {
        let run: @Sendable (any Ledger) async throws -> String
        let expected: String
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let steps: [Step]
        var testDescription: String { name }
    }

    // MARK: Steps

    static func grant(
        _ job: String, order: String, transaction: String, purchase: PurchaseID? = nil,
        environment: AppleEnvironment = .production,
        app: AppScope = .defaultApp, fingerprint: String = "f", revenue: Int64? = nil, followUp: Bool = false,
        stated: RefundTaken? = nil, expect: String
    ) -> Step {
        Step(
            run: { ledger in
                word(
                    try await ledger.record(
                        jobID: job, claim: .grant(orderID: order, transactionID: transaction, purchaseID: purchase),
                        event: Data("{\"job\":\"\(job)\"}".utf8), app: app, fingerprint: fingerprint,
                        environment: environment, revenue: revenue, followUp: followUp, stated: stated))
            }, expected: expect)
    }

    /// What the ledger holds of a transaction's grant for a consumption answer: what its sale counted, the share
    /// refunded, and whether it is a credit no order confirmed.
    static func held(_ transaction: String, expect: String) -> Step {
        Step(
            run: { ledger in
                guard let grant = try await ledger.grant(transactionID: transaction, app: nil) else { return "none" }
                return
                    "revenue:\(grant.revenue.map(String.init) ?? "-") share:\(grant.refundedShare.map(String.init) ?? "-")"
                    + (grant.isUntiedCredit ? " untied" : "")
            }, expected: expect)
    }

    /// A refund or reversal, and what was refunded before it as the event's maker sees it.
    static func notifyBefore(_ change: NotificationChange, expect: String) -> Step {
        Step(
            run: { ledger in
                let record = try await ledger.apply(change) { holder in
                    StoredEvent(
                        eventID: change.id, type: "t", time: "", key: holder.grant.orderID,
                        json: Array("\(holder.refundedBefore.map(String.init) ?? "-")".utf8))
                }
                guard case .recorded(let event?, _) = record else { return "nothing" }
                return "before:\(String(decoding: event.json, as: UTF8.self))"
            }, expected: expect)
    }

    static func deny(_ job: String, fingerprint: String = "f", expect: String) -> Step {
        Step(
            run: { ledger in
                word(
                    try await ledger.record(
                        jobID: job, claim: .deny, event: Data("{\"job\":\"\(job)\"}".utf8), fingerprint: fingerprint))
            }, expected: expect)
    }

    static func notify(_ change: NotificationChange, expect: String) -> Step {
        Step(
            run: { ledger in
                let record = try await ledger.apply(change) { holder in
                    StoredEvent(
                        eventID: "\(change.id)-\(holder.grant.orderID)", type: "t", time: "", key: holder.grant.orderID,
                        json: Array(holder.grant.orderID.utf8))
                }
                switch record {
                case .recorded(let event?, _): return "published:\(event.key)"
                case .recorded(nil, let granted): return granted ? "ignored" : "not_granted"
                case .replay(let event): return "replay:\(event?.key ?? "-")"
                }
            }, expected: expect)
    }

    static func credits(expect: String) -> Step {
        Step(
            run: { ledger in
                let events = try await ledger.creditUnclaimed(now: at.addingTimeInterval(3_600), limit: 10)
                return events.map(\.key).sorted().joined(separator: ",")
            }, expected: expect)
    }

    static func word(_ outcome: Outcome) -> String {
        switch outcome {
        case .recorded: "recorded"
        case .replay(let json): "replay:\(String(decoding: json, as: UTF8.self))"
        case .duplicateTransaction: "duplicate_transaction"
        case .orderAlreadyFulfilled: "order_already_fulfilled"
        case .revoked: "revoked"
        case .credited(let id): "credited:\(id)"
        case .recordedPartlyRefunded(let json): "recorded+\(String(decoding: json, as: UTF8.self))"
        case .takenBack(let json): "taken_back+\(String(decoding: json, as: UTF8.self))"
        }
    }

    /// A prorated refund Apple's proof states: `share` in milliunits, `seconds` after ``at``.
    static func proofRefund(_ share: Int, at seconds: TimeInterval) -> RefundTaken {
        RefundTaken(share: share, at: at.addingTimeInterval(seconds))
    }

    static func change(_ id: String, _ kind: NotificationChange.Kind, environment: AppleEnvironment = .production)
        -> NotificationChange
    {
        NotificationChange(id: id, app: .defaultApp, environment: environment, kind: kind)
    }

    static func revoke(_ id: String, purchase: String, at seconds: TimeInterval = 0, share: Int = 100_000)
        -> NotificationChange
    {
        change(
            id,
            .revoke(
                purchaseID: .transaction(purchase), transactionID: purchase, at: at.addingTimeInterval(seconds),
                share: share)
        )
    }

    static func reinstate(_ id: String, purchase: String, at seconds: TimeInterval) -> NotificationChange {
        change(
            id,
            .reinstate(purchaseID: .transaction(purchase), transactionID: purchase, at: at.addingTimeInterval(seconds)))
    }

    static func reported(_ id: String) -> NotificationChange {
        change(
            "report-\(id)",
            .purchased(
                ReportedPurchase(
                    purchaseID: .transaction(id), transactionID: id, originalTransactionID: id, productID: "gems",
                    quantity: 1,
                    dueAt: at,
                    event: StoredEvent(
                        eventID: "credit-\(id)", type: "receipt.unclaimed", time: "", key: "unclaimed:\(id)",
                        json: Array("{}".utf8)))))
    }

    static func renewal(_ id: String, original: String, line: String, seconds: TimeInterval) -> NotificationChange {
        change(
            "renew-\(id)",
            .subscription(
                SubscriptionChange(
                    originalTransactionID: original,
                    state: SubscriptionState(
                        status: .active, expiresAt: at.addingTimeInterval(86_400), gracePeriodExpiresAt: nil,
                        autoRenew: true, autoRenewProductID: "vip", changedAt: at.addingTimeInterval(seconds)),
                    renewal: .init(
                        purchaseID: .billingPeriod(webOrderLineItemID: "\(line)"), transactionID: id, productID: "vip",
                        quantity: 1,
                        eventID: "renewal-\(line)"))))
    }

    // MARK: The tables

    static let claims: [Row] = [
        Row(
            name: "a grant, then the same job again: its first event",
            steps: [
                grant("j1", order: "o1", transaction: "100", expect: "recorded"),
                grant("j1", order: "o1", transaction: "100", expect: "replay:{\"job\":\"j1\"}"),
            ]),
        Row(
            name: "the same purchase for another order: duplicate_transaction",
            steps: [
                grant("j1", order: "o1", transaction: "100", expect: "recorded"),
                grant("j2", order: "o2", transaction: "100", expect: "duplicate_transaction"),
            ]),
        Row(
            name: "another purchase for a granted order: order_already_fulfilled",
            steps: [
                grant("j1", order: "o1", transaction: "100", expect: "recorded"),
                grant("j2", order: "o1", transaction: "101", expect: "order_already_fulfilled"),
            ]),
        Row(
            name: "the same order and transaction under a new job: the same grant",
            steps: [
                grant("j1", order: "o1", transaction: "100", expect: "recorded"),
                grant("j2", order: "o1", transaction: "100", expect: "recorded"),
            ]),
        Row(
            name:
                "a restore (another transaction id of one purchase): the order's is order_already_fulfilled, another's a duplicate",
            steps: [
                grant("j1", order: "o1", transaction: "100", purchase: .transaction("p-100"), expect: "recorded"),
                grant(
                    "j2", order: "o1", transaction: "105", purchase: .transaction("p-100"),
                    expect: "order_already_fulfilled"),
                grant(
                    "j3", order: "o2", transaction: "106", purchase: .transaction("p-100"),
                    expect: "duplicate_transaction"),
            ]),
        Row(
            name: "a purchase refunded before any grant, and one refunded after its grant: revoked",
            steps: [
                notify(revoke("n1", purchase: "200"), expect: "not_granted"),
                grant("j1", order: "o1", transaction: "200", expect: "revoked"),
                grant("j2", order: "o2", transaction: "201", expect: "recorded"),
                notify(revoke("n2", purchase: "201"), expect: "published:o2"),
                grant("j3", order: "o3", transaction: "201", expect: "revoked"),
                grant("j4", order: "o2", transaction: "201", expect: "revoked"),
            ]),
        Row(
            name:
                "a purchase refunded in part before any grant: granted with its follow-up, once; refunded in all: revoked",
            steps: [
                notify(revoke("n1", purchase: "250", at: 5, share: 33_333), expect: "not_granted"),
                grant("j0", order: "o0", transaction: "250", expect: "revoked"),
                grant(
                    "j1", order: "o1", transaction: "250", revenue: 2_990, followUp: true,
                    expect: "recorded+taken:33333"),
                grant(
                    "j1", order: "o1", transaction: "250", followUp: true,
                    expect: "replay:{\"job\":\"j1\"}taken:33333"),
                held("250", expect: "revenue:2990 share:33333"),
                grant("j2", order: "o2", transaction: "250", followUp: true, expect: "revoked"),
                notify(revoke("n2", purchase: "251", at: 5), expect: "not_granted"),
                grant("j3", order: "o3", transaction: "251", followUp: true, expect: "revoked"),
            ]),
        Row(
            name:
                "a refund of part of a purchase the order holds, stated by Apple's proof and never heard of: taken back once; its notification takes nothing twice",
            steps: [
                grant("j1", order: "o1", transaction: "260", revenue: 2_990, followUp: true, expect: "recorded"),
                grant(
                    "j2", order: "o1", transaction: "260", followUp: true,
                    stated: proofRefund(40_000, at: 5), expect: "taken_back+taken:40000"),
                grant(
                    "j2", order: "o1", transaction: "260", followUp: true,
                    stated: proofRefund(40_000, at: 5),
                    expect: "replay:{\"job\":\"j2\"}taken:40000"),
                held("260", expect: "revenue:2990 share:40000"),
                notify(revoke("n1", purchase: "260", at: 5, share: 40_000), expect: "ignored"),
                notify(revoke("n2", purchase: "260", at: 10), expect: "published:o1"),
                grant("j3", order: "o1", transaction: "260", followUp: true, expect: "revoked"),
                // Without a follow-up to make (a caller that cannot take a share back): answered as before.
                grant("j4", order: "o4", transaction: "261", expect: "recorded"),
                grant(
                    "j5", order: "o4", transaction: "261",
                    stated: proofRefund(40_000, at: 5), expect: "recorded"),
            ]),
        Row(
            name:
                "a refund Apple gave back after the proof that states it is over; refunded again, and never heard of, it is taken back",
            steps: [
                grant("j1", order: "o1", transaction: "262", followUp: true, expect: "recorded"),
                notify(revoke("n1", purchase: "262", at: 5, share: 40_000), expect: "published:o1"),
                notify(reinstate("n2", purchase: "262", at: 8), expect: "published:o1"),
                grant(
                    "j2", order: "o1", transaction: "262", followUp: true,
                    stated: proofRefund(40_000, at: 5), expect: "recorded"),
                grant(
                    "j3", order: "o2", transaction: "263", followUp: true,
                    stated: proofRefund(40_000, at: 5), expect: "recorded+taken:40000"),
                notify(reinstate("n3", purchase: "263", at: 8), expect: "published:o2"),
                grant(
                    "j4", order: "o2", transaction: "263", followUp: true,
                    stated: proofRefund(40_000, at: 5), expect: "recorded"),
                grant(
                    "j5", order: "o1", transaction: "262", followUp: true,
                    stated: proofRefund(30_000, at: 20), expect: "taken_back+taken:30000"),
                grant("j6", order: "o1", transaction: "262", expect: "revoked"),
            ]),
        Row(
            name: "environments and apps are apart: the same transaction id in Sandbox, or in another app, is its own",
            steps: [
                grant("j1", order: "o1", transaction: "300", expect: "recorded"),
                grant("j2", order: "o2", transaction: "300", environment: .sandbox, expect: "recorded"),
                grant("j3", order: "o1", transaction: "300", app: AppScope("com.other"), expect: "recorded"),
            ]),
        Row(
            name: "a denial claims nothing, is kept, and a job id reused with other content is another job",
            steps: [
                deny("d1", expect: "recorded"),
                deny("d1", expect: "replay:{\"job\":\"d1\"}"),
                grant("d1", order: "o1", transaction: "400", fingerprint: "other", expect: "recorded"),
            ]),
        Row(
            name: "a subscription's period credited to its order: a job of that order presenting it is the credit",
            steps: [
                grant(
                    "j1", order: "vip", transaction: "500", purchase: .billingPeriod(webOrderLineItemID: "L1"),
                    expect: "recorded"),
                notify(renewal("501", original: "500", line: "L2", seconds: 10), expect: "published:vip"),
                grant(
                    "j2", order: "vip", transaction: "501", purchase: .billingPeriod(webOrderLineItemID: "L2"),
                    expect: "credited:renewal-L2"),
                grant(
                    "j3", order: "other", transaction: "501", purchase: .billingPeriod(webOrderLineItemID: "L2"),
                    expect: "duplicate_transaction"),
            ]),
    ]

    static let notifications: [Row] = [
        Row(
            name: "a refund, the same refund again, a larger share, a stale refund, a reversal",
            steps: [
                grant("j1", order: "o1", transaction: "600", expect: "recorded"),
                notify(revoke("n1", purchase: "600", at: 10, share: 40_000), expect: "published:o1"),
                notify(revoke("n1", purchase: "600", at: 10, share: 40_000), expect: "replay:o1"),
                notify(revoke("n2", purchase: "600", at: 20, share: 40_000), expect: "ignored"),
                notify(revoke("n3", purchase: "600", at: 30), expect: "published:o1"),
                notify(revoke("n4", purchase: "600", at: 5), expect: "ignored"),
                notify(reinstate("n5", purchase: "600", at: 40), expect: "published:o1"),
                grant("j2", order: "o2", transaction: "600", expect: "duplicate_transaction"),
            ]),
        Row(
            name: "a consumption request is kept only for a purchase granted here",
            steps: [
                grant("j1", order: "o1", transaction: "700", expect: "recorded"),
                notify(
                    change("c1", .consumptionRequest(transactionID: "700", respondBy: at.addingTimeInterval(43_200))),
                    expect: "published:o1"),
                notify(
                    change("c2", .consumptionRequest(transactionID: "701", respondBy: at.addingTimeInterval(43_200))),
                    expect: "not_granted"),
            ]),
        Row(
            name: "a Sandbox refund never touches the Production grant",
            steps: [
                grant("j1", order: "o1", transaction: "750", expect: "recorded"),
                notify(
                    change(
                        "s1", .revoke(purchaseID: .transaction("750"), transactionID: "750", at: at),
                        environment: .sandbox),
                    expect: "not_granted"),
                grant("j2", order: "o2", transaction: "750", expect: "duplicate_transaction"),
            ]),
        Row(
            name: "a purchase no job claimed is credited once; claimed in time, never; refunded, never",
            steps: [
                notify(reported("800"), expect: "not_granted"),
                notify(reported("801"), expect: "not_granted"),
                grant("j1", order: "o1", transaction: "801", expect: "recorded"),
                notify(reported("802"), expect: "not_granted"),
                notify(revoke("r802", purchase: "802"), expect: "not_granted"),
                credits(expect: "unclaimed:800"),
                grant("j2", order: "o2", transaction: "800", expect: "duplicate_transaction"),
            ]),
        Row(
            name: "a credit refunded before its publish is still published: its refund went out for its order",
            steps: [
                notify(reported("810"), expect: "not_granted"),
                credits(expect: "unclaimed:810"),
                held("810", expect: "revenue:- share:- untied"),
                notify(revoke("r810", purchase: "810", at: 10), expect: "published:unclaimed:810"),
                credits(expect: "unclaimed:810"),
            ]),
        Row(
            name: "a purchase no job claimed, refunded past its due time, then the refund reversed: credited then",
            steps: [
                notify(reported("830"), expect: "not_granted"),
                notify(revoke("r830", purchase: "830", at: 10), expect: "not_granted"),
                credits(expect: ""),
                notify(reinstate("n830", purchase: "830", at: 20), expect: "not_granted"),
                credits(expect: "unclaimed:830"),
                grant("j1", order: "o1", transaction: "830", expect: "duplicate_transaction"),
            ]),
        Row(
            name: "a refund's event knows what was refunded before it: none, a share, and all before a reversal",
            steps: [
                grant("j1", order: "o1", transaction: "820", revenue: 990, expect: "recorded"),
                notifyBefore(revoke("n1", purchase: "820", at: 10, share: 40_000), expect: "before:0"),
                notifyBefore(revoke("n2", purchase: "820", at: 20), expect: "before:40000"),
                notifyBefore(reinstate("n3", purchase: "820", at: 30), expect: "before:100000"),
                held("820", expect: "revenue:990 share:-"),
            ]),
    ]

    @Test("every row of the claim table gives the same outcomes on SQLite and PostgreSQL", arguments: claims)
    func claimTable(row: Row) async throws {
        try await run(row)
    }

    @Test(
        "every row of the notification table gives the same outcomes on SQLite and PostgreSQL", arguments: notifications
    )
    func notificationTable(row: Row) async throws {
        try await run(row)
    }

    func run(_ row: Row) async throws {
        var seen: [Backend: [String]] = [:]
        for backend in Backend.allCases {
            let ledger = try await backend.open()
            var outcomes: [String] = []
            for step in row.steps { outcomes.append(try await step.run(ledger)) }
            await ledger.close()
            seen[backend] = outcomes
        }
        #expect(seen[.sqlite] == row.steps.map(\.expected), "SQLite")
        #expect(seen[.postgresql] == row.steps.map(\.expected), "PostgreSQL")
        let schema = try #require(PostgresSchema(name: PostgresSchema.defaultName))
        let statements = LedgerEngine(
            dialect: StatementByStatement(
                base: try await PostgresDialect(url: try makePostgresDatabase(), poolSize: 8, schema: schema)))
        var outcomes: [String] = []
        for step in row.steps { outcomes.append(try await step.run(statements)) }
        await statements.close()
        #expect(outcomes == row.steps.map(\.expected), "PostgreSQL, statement by statement")
    }

    @Test("decisions of one batch see each other: two claims of one purchase in one batch grant it once")
    func oneBatch() {
        var facts = ClaimFacts()
        func decision(_ job: String, order: String, transaction: String) -> Decision {
            Decision(
                key: DecisionKey(app: .defaultApp, jobID: job, fingerprint: "f"),
                grant: GrantClaim(orderID: order, transactionID: transaction),
                event: StoredEvent(eventID: "e-\(job)", type: "receipt.granted", time: "", key: order, json: []))
        }
        let results = ClaimRules.decide(
            [
                decision("a", order: "o1", transaction: "900"), decision("b", order: "o2", transaction: "900"),
                decision("c", order: "o1", transaction: "901"), decision("a", order: "o1", transaction: "900"),
            ], facts: &facts)
        #expect(results.map(\.outcome).prefix(3) == [.recorded, .duplicateTransaction, .orderAlreadyFulfilled])
        #expect(
            results[3].outcome
                == .replay(StoredEvent(eventID: "e-a", type: "receipt.granted", time: "", key: "o1", json: [])))
        #expect(results.compactMap(\.grant).count == 1)
        // Orders compared as bytes: two spellings of "é" are two orders.
        var bytes = ClaimFacts()
        let composed = ClaimRules.decide([decision("x", order: "caf\u{E9}", transaction: "950")], facts: &bytes)
        let decomposed = ClaimRules.decide([decision("y", order: "cafe\u{301}", transaction: "951")], facts: &bytes)
        #expect(composed[0].outcome == .recorded && decomposed[0].outcome == .recorded)
    }
}

/// PostgreSQL with the defaults of ``LedgerDialect``: the claim, a batch's stored answers and a notification's facts
/// statement by statement, instead of its server functions.
struct StatementByStatement: LedgerDialect {
    let base: PostgresDialect
    var concurrentBatches: Int { base.concurrentBatches }
    var recordGathering: Duration { base.recordGathering }
    var poolStats: LedgerPoolStats? { base.poolStats }

    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await base.write(body)
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await base.read(body)
    }

    func ping() async throws { try await base.ping() }

    func close() async { await base.close() }
}
