import AppStoreSimulator
import Foundation
import HTTPClient
import Ledger
import LedgerDomain
import Messaging
import Observability
import ReceiptWorker
import Support
import Synchronization
import TestSupport
import Testing

@testable import DeskService

/// A lead's approval ends only once the credit's event is out: against the App Store simulator and a SQLite ledger
/// (the desk's store and the credit's ledger in one file, as the desk runs), with the broker away on demand.
@Suite("A held credit's approval ends once its event is out")
struct ApprovalEndTests {
    /// The desk's clock, moved by the test: a stalled approval is one claimed five minutes ago.
    final class Clock: Sendable {
        private let time = Mutex(Date())
        var now: Date { time.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { time.withLock { $0.addTimeInterval(seconds) } }
    }

    /// The results topic: refuses while `away`, and keeps what it took.
    final class Broker: Sendable {
        private let state = Mutex((away: true, attempts: [String](), taken: [StoredEvent]()))
        var attempts: [String] { state.withLock { $0.attempts } }
        var taken: [StoredEvent] { state.withLock { $0.taken } }
        func comeBack() { state.withLock { $0.away = false } }
        func publish(_ event: StoredEvent) throws -> DeliveryReport {
            try state.withLock { state in
                state.attempts.append(event.eventID)
                guard !state.away else { throw BrokerAway() }
                state.taken.append(event)
                return DeliveryReport(topic: "results", partition: 0, offset: Int64(state.taken.count - 1))
            }
        }
    }

    @Test(
        "the broker away after the credit is recorded: the approval stays approving, cannot be rejected, and the next lead's approval once it stalled publishes the same event"
    )
    func recordedApprovalEndsWithItsEvent() async throws {
        let simulator = try AppStoreSimulator()
        simulator.start()
        defer { simulator.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("approval-end-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let root = directory.appendingPathComponent("root.pem")
        try Data(AppStoreSimulator.testRootPEM.utf8).write(to: root)
        let configuration = try ConfigurationLoader.build([
            ("apple.bundle_id", "com.example"),
            ("apple.app_apple_id", String(AppStoreSimulator.Configuration().appAppleID)),
            ("apple.api.key_id", "keyId"), ("apple.api.issuer_id", "issuerId"),
            ("apple.api.private_key_file", DeskRulesTests.keyPath),
            ("apple.api.production_url", "\(simulator.baseURL)/production"),
            ("apple.api.sandbox_url", "\(simulator.baseURL)/sandbox"),
            ("apple.verify_receipt.production_url", "\(simulator.baseURL)/production/verifyReceipt"),
            ("apple.verify_receipt.sandbox_url", "\(simulator.baseURL)/sandbox/verifyReceipt"),
            ("apple.allow_insecure_urls", "true"), ("apple.root_certificates", root.path),
        ])
        let ledger = try LedgerEngine.sqlite(path: directory.appendingPathComponent("ledger.sqlite").path)
        let logger = Logger(label: "test")
        let apps = try SupportDesk.all(configuration, ledger: ledger, logger: logger).map {
            DeskActions.App(name: $0.name, bundleID: $0.bundleID, desk: $0.desk)
        }
        let clock = Clock()
        let broker = Broker()
        // Every credit held for a lead: the player's cap is 0.
        let desk = DeskActions(
            apps: apps, store: ledger, caps: CreditCaps(agentDaily: 20, playerDaily: 0),
            publish: { try broker.publish($0) }, finishTransactions: false,
            metrics: DeskMetrics(registry: MetricsRegistry()), now: { clock.now })

        let token = UUID()
        let admin = SimulatorAdmin(baseURL: simulator.baseURL, http: HTTPClient(logger: logger))
        let bought = try await admin.purchase(["product_id": "coins_100", "app_account_token": token.uuidString])
        let held = try await desk.credit(
            DeskRulesTests.ana,
            body: DeskRulesTests.body([
                "ticket": "T-7", "transaction_id": bought.transactionID, "order_id": "shop-7", "user_id": "player-7",
                "reason": "paid, got nothing", "app_account_token": token.uuidString,
            ]))
        #expect(held.status == 202, "\(String(decoding: held.body, as: UTF8.self))")
        let id = Int64(try #require(DeskRulesTests.object(held)["approval_id"] as? Int))
        let ticket = DeskRulesTests.body(["ticket": "T-7"])

        // Recorded in the ledger, its event refused by the broker: 503, and the approval is not over.
        let first = try await desk.approve(DeskRulesTests.lee, id: id, body: ticket)
        #expect(first.status == 503, "\(String(decoding: first.body, as: UTF8.self))")
        #expect(broker.attempts.count == 1 && broker.taken.isEmpty)
        let recorded = try #require(try await ledger.approvalRequest(id: id))
        #expect(recorded.status == ApprovalRequest.Status.approving && recorded.isRecorded)
        // Recorded, it is never rejected, nor approved again before it shows stalled.
        let rejection = try await desk.reject(
            DeskRulesTests.lou, id: id, body: DeskRulesTests.body(["ticket": "T-7", "reason": "no such order"]))
        // The lead is told what finishes it.
        #expect(rejection.status == 409 && String(decoding: rejection.body, as: UTF8.self).contains("approve it again"))
        #expect(try await desk.approve(DeskRulesTests.lou, id: id, body: ticket).status == 409)
        #expect(try await ledger.approvalRequest(id: id)?.isRecorded == true)

        // Five minutes on it shows stalled; another lead's approval publishes the event the ledger holds.
        clock.advance(ApprovalRequest.stalledAfter + 1)
        let listed =
            DeskRulesTests.object(try await desk.approvalRequests(DeskRulesTests.lou))["approvals"] as? [[String: Any]]
        #expect(listed?.compactMap { $0["id"] as? Int } == [Int(id)])
        broker.comeBack()
        let second = try await desk.approve(DeskRulesTests.lou, id: id, body: ticket)
        #expect(second.status == 200, "\(String(decoding: second.body, as: UTF8.self))")
        let attempted = try #require(broker.attempts.first)
        #expect(broker.taken.map(\.eventID) == [attempted], "the same event, once out")
        let approved = try await ledger.approvalRequest(id: id)
        #expect(approved?.status == ApprovalRequest.Status.approved && approved?.decision?.by == "lou")
        #expect(try await desk.approve(DeskRulesTests.lee, id: id, body: ticket).status == 409)
        #expect(broker.taken.count == 1)
        await ledger.close()
    }
}
