import Foundation
import TestSupport
import Testing
import Vocabulary

@testable import Ledger

/// A refund request opened again is a new request: an answer a grant service gave the one before does not answer
/// it, whichever release opened it again.
@Suite("A refund request opened again", .timeLimit(.minutes(1)))
struct ConsumptionReopenedTests {
    @Test(
        "opened again by the release before (which knows nothing of answers received), the request is due for the policy and unanswered"
    )
    func reopenedByTheReleaseBefore() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-\(UUID()).sqlite").path
        let ledger = try await LedgerFactory.open(url: "sqlite:\(path)")
        _ = try await ledger.record(
            jobID: "j1", claim: .grant(orderID: "o1", transactionID: "10"),
            event: Data(#"{"decision":"grant","event_id":"e1"}"#.utf8))
        let now = Date()
        _ = try await ledger.apply(
            NotificationChange(
                id: "request-1", app: .defaultApp, environment: .production,
                kind: .consumptionRequest(transactionID: "10", respondBy: now.addingTimeInterval(600)))
        ) { holder in
            StoredEvent(eventID: "c1", type: "t", time: "", key: holder.grant.orderID, json: Array("{}".utf8))
        }
        try await ledger.consumptionAnswerReceived(app: .defaultApp, environment: .production, transactionID: "10")
        func answered() async throws -> Bool {
            try await ledger.consumptionRequestAnswered(app: .defaultApp, environment: .production, transactionID: "10")
        }
        #expect(try await answered())
        // 1.0.0's upsert: a later request's deadline and time, answered_at cleared, answer_received_at untouched. The
        // request's time a second after the answer was received, whatever time the steps above took (a busy machine).
        let reopenedAt = Date().addingTimeInterval(1)
        let respondBy = now.addingTimeInterval(3_600)
        let connection = try SQLiteConnection(path: path)
        try connection.execute(
            """
            UPDATE consumption_requests SET notification_id = 'request-2', respond_by = '\(RFC3339.format(respondBy))',
                requested_at = '\(RFC3339.format(reopenedAt))', answered_at = NULL
                WHERE transaction_id = '10'
            """)
        connection.close()
        #expect(try await answered() == false, "the first request's answer answered the second")
        let due = try await ledger.dueConsumptionRequests(
            app: .defaultApp, dueBy: respondBy.addingTimeInterval(1), now: now, limit: 10)
        #expect(due.map(\.transactionID) == ["10"])
        // The grant service answers the second request: answered again.
        try await Task.sleep(until: .now + .seconds(max(0, reopenedAt.timeIntervalSinceNow)) + .milliseconds(100))
        try await ledger.consumptionAnswerReceived(app: .defaultApp, environment: .production, transactionID: "10")
        #expect(try await answered())
    }
}

@Suite("A new SQLite ledger opened by two at once", .timeLimit(.minutes(1)))
struct SQLiteNewFileTests {
    @Test("a worker and a command opening one new file at once both open it: the ledger is made once")
    func twoOpenANewFile() async throws {
        for _ in 0..<20 {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-\(UUID()).sqlite").path
            async let first = LedgerFactory.open(url: "sqlite:\(path)")
            async let second = LedgerFactory.open(url: "sqlite:\(path)")
            let (one, two) = try await (first, second)
            #expect(
                try await one.record(
                    jobID: "j", claim: .grant(orderID: "o", transactionID: "1"), event: Data("{}".utf8)) == .recorded)
            await one.close()
            await two.close()
        }
    }
}
