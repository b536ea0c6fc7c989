import Foundation
import TestSupport
import Testing
import Vocabulary

@testable import Ledger

/// Retention on both ledgers: what outlived it is pruned, in batches, while what must stay stays.
@Suite("Retention", .timeLimit(.minutes(2)))
struct RetentionTests {
    static let event = Data(#"{"decision":"grant","event_id":"e"}"#.utf8)

    @Test(
        "retention prunes handled notifications and what is settled, in batches; a waiting purchase, a refund and every grant stay",
        arguments: Backend.allCases)
    func retention(backend: Backend) async throws {
        let ledger = try await backend.open()
        let at = Date(timeIntervalSinceNow: -86_400)
        func notify(_ id: String, _ kind: NotificationChange.Kind) async throws {
            _ = try await ledger.apply(
                NotificationChange(id: id, app: .defaultApp, environment: .production, kind: kind)
            ) { holder in
                StoredEvent(eventID: id, type: "t", time: "", key: holder.grant.orderID, json: Array("{}".utf8))
            }
        }
        func reported(_ id: String, due: Date) -> NotificationChange.Kind {
            .purchased(
                ReportedPurchase(
                    purchaseID: .transaction(id), transactionID: id, originalTransactionID: id, productID: "gems",
                    quantity: 1,
                    dueAt: due,
                    event: StoredEvent(
                        eventID: "credit-\(id)", type: "receipt.unclaimed", time: "", key: "unclaimed:\(id)",
                        json: Array("{}".utf8))))
        }
        _ = try await ledger.record(jobID: "j1", claim: .grant(orderID: "o1", transactionID: "10"), event: Self.event)
        _ = try await ledger.record(jobID: "j2", claim: .grant(orderID: "o2", transactionID: "11"), event: Self.event)
        try await notify("c1", .consumptionRequest(transactionID: "10", respondBy: at))
        // A refund reversed (its state prunable), a refund of a purchase never granted (kept for good).
        try await notify("r1", .revoke(purchaseID: .transaction("11"), transactionID: "11", at: at))
        try await notify(
            "r2", .reinstate(purchaseID: .transaction("11"), transactionID: "11", at: at.addingTimeInterval(1)))
        try await notify("r3", .revoke(purchaseID: .transaction("12"), transactionID: "12", at: at))
        // Reported purchases: one credited and published, one still waiting.
        try await notify("p1", reported("20", due: at))
        try await notify("p2", reported("21", due: Date(timeIntervalSinceNow: 86_400)))
        let credits = try await ledger.creditUnclaimed(now: Date(), limit: 10)
        try await ledger.markCreditsPublished(eventIDs: credits.map(\.eventID))
        let later = Date(timeIntervalSinceNow: 3_600)
        let deleted = try await ledger.prune(Retention(notificationsBefore: later, settledBefore: later))
        #expect(deleted[.notifications] == 6)
        #expect(deleted[.consumptionRequests] == 1)
        #expect(deleted[.unclaimedPurchases] == 1, "the credited one; the waiting one stays")
        #expect(deleted[.purchaseStates] == 1, "the reinstated one; the refund stays")
        #expect(try await ledger.waitingUnclaimed() == 1)
        // What must stay stays: the refund still denies, grants still claim.
        #expect(
            try await ledger.record(jobID: "j3", claim: .grant(orderID: "o3", transactionID: "12"), event: Self.event)
                == .revoked)
        #expect(
            try await ledger.record(jobID: "j4", claim: .grant(orderID: "o4", transactionID: "10"), event: Self.event)
                == .duplicateTransaction)
        #expect(
            try await ledger.record(jobID: "j5", claim: .grant(orderID: "o5", transactionID: "20"), event: Self.event)
                == .duplicateTransaction, "the credit holds its purchase")
        // Nothing left to prune: a second pass deletes nothing.
        let again = try await ledger.prune(Retention(notificationsBefore: later, settledBefore: later))
        #expect(again.values.allSatisfy { $0 == 0 })
        await ledger.close()
    }
}
