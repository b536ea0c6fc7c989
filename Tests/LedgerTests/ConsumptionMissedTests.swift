import Foundation
import Ledger
import Testing
import Vocabulary

/// Refund requests that passed Apple's deadline with no answer: counted for a day, the answered ones never.
@Suite("Refund requests missed", .timeLimit(.minutes(1)))
struct ConsumptionMissedTests {
    @Test(
        "a request past its deadline with no answer Apple took is missed for a day; one taken, one open, one older are not",
        arguments: Backend.allCases)
    func missed(_ backend: Backend) async throws {
        let ledger = try await backend.open()
        let now = Date()
        // Deadlines as Apple's notifications give them: three passed an hour ago, one next hour, one two days ago.
        let requests: [(transaction: String, respondBy: Date)] = [
            ("10", now.addingTimeInterval(-3_600)), ("11", now.addingTimeInterval(-3_600)),
            ("12", now.addingTimeInterval(3_600)), ("13", now.addingTimeInterval(-2 * 86_400)),
            ("14", now.addingTimeInterval(-3_600)),
        ]
        for (index, request) in requests.enumerated() {
            _ = try await ledger.record(
                jobID: "j\(index)", claim: .grant(orderID: "o\(index)", transactionID: request.transaction),
                event: Data(#"{"decision":"grant","event_id":"e\#(index)"}"#.utf8))
            _ = try await ledger.apply(
                NotificationChange(
                    id: "request-\(index)", app: .defaultApp, environment: .production,
                    kind: .consumptionRequest(transactionID: request.transaction, respondBy: request.respondBy))
            ) { holder in
                StoredEvent(
                    eventID: "c\(index)", type: "t", time: "", key: holder.grant.orderID, json: Array("{}".utf8))
            }
        }
        // A grant service's answer to 11 came after the deadline (late: Apple never took it); Apple took 14's.
        try await ledger.consumptionAnswerReceived(app: .defaultApp, environment: .production, transactionID: "11")
        try await ledger.answerConsumptionRequest(app: .defaultApp, environment: .production, transactionID: "14")
        let later = Date()
        let missed = try await ledger.missedConsumptionRequests(since: later.addingTimeInterval(-86_400), now: later)
        #expect(missed == [.defaultApp: 2])
        // Two hours on, 12's deadline passed too.
        let twoHoursOn = later.addingTimeInterval(7_200)
        #expect(
            try await ledger.missedConsumptionRequests(since: twoHoursOn.addingTimeInterval(-86_400), now: twoHoursOn)
                == [.defaultApp: 3])
        await ledger.close()
    }
}
