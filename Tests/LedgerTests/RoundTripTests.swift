import Foundation
import Testing
import Vocabulary

@testable import Ledger

/// What the ledger's calls cost PostgreSQL, counted by its pool (`receipt_worker_ledger_round_trips_total`): each
/// statement a round trip, which under load is what a call waits for.
@Suite("The PostgreSQL ledger's round trips per call", .timeLimit(.minutes(1)))
struct RoundTripTests {
    @Test(
        "a refund, the same refund again, its reversal, a consumption request and a reported purchase each cost at most four round trips"
    )
    func notifications() async throws {
        let ledger = try await Backend.postgresql.open()
        let granted = try await ledger.record(
            jobID: "j1", claim: .grant(orderID: "o1", transactionID: "800"), event: Data("{}".utf8))
        #expect(granted == .recorded)

        func cost(_ change: NotificationChange) async throws -> (roundTrips: Int, published: Bool) {
            let before = ledger.poolStats?.roundTrips ?? 0
            let record = try await ledger.apply(change) { holder in
                StoredEvent(eventID: change.id, type: "t", time: "", key: holder.grant.orderID, json: [])
            }
            let published: Bool
            switch record {
            case .recorded(let event, _): published = event != nil
            case .replay(let event): published = event != nil
            }
            return ((ledger.poolStats?.roundTrips ?? 0) - before, published)
        }
        // Begin, the facts (the notification handled?, the purchase's lock, its grant and state), the writes, commit.
        let refund = try await cost(RuleTableTests.revoke("n1", purchase: "800", at: 10))
        #expect(refund == (4, true))
        // Handled before: begin, the facts, commit.
        let again = try await cost(RuleTableTests.revoke("n1", purchase: "800", at: 10))
        #expect(again == (3, true))
        let reversal = try await cost(RuleTableTests.reinstate("n2", purchase: "800", at: 20))
        #expect(reversal == (4, true))
        let request = try await cost(
            RuleTableTests.change(
                "n3", .consumptionRequest(transactionID: "800", respondBy: Date().addingTimeInterval(43_200))))
        #expect(request == (4, true))
        let reported = try await cost(RuleTableTests.reported("801"))
        #expect(reported == (4, false))
        #expect(try await ledger.waitingUnclaimed() == 1)
        await ledger.close()
    }
}
