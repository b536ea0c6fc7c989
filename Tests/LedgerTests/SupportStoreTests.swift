import Foundation
import Ledger
import TestSupport
import Testing
import Vocabulary

/// What `receipt-worker lookup` reads of the ledger, the same from both backends.
@Suite("Support reads: a purchase's holder and report, an order's grants, a token's reports", .timeLimit(.minutes(1)))
struct SupportStoreTests {
    @Test(
        "a grant names its order, player and time; another environment or app holds nothing",
        arguments: Backend.allCases)
    func grantRecord(_ backend: Backend) async throws {
        let ledger = try await backend.open()
        _ = try await ledger.record(
            jobID: "j1", claim: .grant(orderID: "o1", transactionID: "100"), event: Data("{}".utf8))
        let record = try await ledger.supportRecord(
            app: .defaultApp, environment: .production, purchaseID: .transaction("100"), transactionID: "100")
        let grant = try #require(record.grant)
        #expect(grant.orderID == "o1" && grant.userID == "player-o1" && grant.credit == .job && grant.revokedAt == nil)
        #expect(
            grant.grantedAt.map { abs($0.timeIntervalSinceNow) < 600 } == true, "\(String(describing: grant.grantedAt))"
        )
        #expect(record.report == nil)
        let sandbox = try await ledger.supportRecord(
            app: .defaultApp, environment: .sandbox, purchaseID: .transaction("100"), transactionID: "100")
        #expect(sandbox == SupportRecord())
        let other = try await ledger.supportRecord(
            app: AppScope("com.other"), environment: .production, purchaseID: .transaction("100"), transactionID: "100")
        #expect(other == SupportRecord())
        let granted = try await ledger.grantedTransactions(orderID: "o1", app: .defaultApp)
        #expect(granted.map(\.1) == ["100"] && granted.first?.0 == .production)
        #expect(try await ledger.grantedTransactions(orderID: "o2", app: .defaultApp).isEmpty)
        await ledger.close()
    }

    @Test(
        "a purchase Apple reported waits with its due time, found by its app account token", arguments: Backend.allCases
    )
    func reported(_ backend: Backend) async throws {
        let ledger = try await backend.open()
        let token = "6f1c2b7e-4a0d-4c9e-8b3a-2d5e7f9a1c04"
        let due = Date(timeIntervalSinceNow: 3600)
        _ = try await ledger.apply(
            NotificationChange(
                id: "n1", app: .defaultApp, environment: .production,
                kind: .purchased(
                    ReportedPurchase(
                        purchaseID: .transaction("200"), transactionID: "200", originalTransactionID: "200",
                        productID: "gems", quantity: 1, dueAt: due,
                        event: StoredEvent(
                            eventID: "credit-200", type: "receipt.unclaimed", time: "", key: "unclaimed:200",
                            json: Array(#"{"app_account_token":"\#(token)"}"#.utf8))))), event: { _ in nil })
        let record = try await ledger.supportRecord(
            app: .defaultApp, environment: .production, purchaseID: .transaction("200"), transactionID: "200")
        let report = try #require(record.report)
        #expect(report.state == "waiting" && report.eventID == "credit-200" && !report.published)
        #expect(report.dueAt.map { abs($0.timeIntervalSince(due)) < 1 } == true)
        #expect(record.grant == nil)
        let found = try await ledger.reportedTransactions(appAccountToken: token, app: .defaultApp)
        #expect(found.map(\.1) == ["200"])
        #expect(try await ledger.reportedTransactions(appAccountToken: "x' OR '1'='1", app: .defaultApp).isEmpty)
        await ledger.close()
    }
}
