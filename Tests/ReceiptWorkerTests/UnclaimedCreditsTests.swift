@testable import Flows
import Foundation
import Ledger
import Messaging
import Observability
@testable import ReceiptWorker
import Synchronization
import Testing
import Vocabulary

/// What a chore sends, kept; refused while `refusing`.
final class RecordingSender: MessageSender {
    let sent = Mutex<[OutboundMessage]>([])
    let refusing = Atomic<Bool>(false)

    func send(_ message: OutboundMessage) async throws -> DeliveryReport {
        struct Refused: Error {}
        guard !refusing.load(ordering: .relaxed) else { throw Refused() }
        let offset = sent.withLock { sent in
            sent.append(message)
            return Int64(sent.count - 1)
        }
        return DeliveryReport(topic: message.topic, partition: 0, offset: offset)
    }
}

/// A purchase Apple reported that no job claimed is credited once its wait is over, and its `receipt.unclaimed`
/// sent until the broker takes it: a send refused leaves it for the next round, with the same event id.
@Suite("Purchases no job claimed, credited and sent")
struct UnclaimedCreditsTests {
    @Test("a credit is sent once the broker takes it: refused, the next round sends it, then never again")
    func sentUntilTaken() async throws {
        let ledger = try LedgerEngine.sqlite(path: ":memory:")
        let event = StoredEvent(
            eventID: "credit-10", type: "receipt.unclaimed", time: "2026-12-04T00:00:00.000Z", key: "unclaimed:10",
            json: Array(#"{"event_id":"credit-10"}"#.utf8))
        _ = try await ledger.apply(
            NotificationChange(
                id: "n1", app: .defaultApp, environment: .production,
                kind: .purchased(
                    ReportedPurchase(
                        purchaseID: .transaction("10"), transactionID: "10", originalTransactionID: "10",
                        productID: "gems", quantity: 1, dueAt: Date(timeIntervalSinceNow: -60), event: event)))
        ) { _ in nil }
        let sender = RecordingSender()
        let credits = UnclaimedCredits(
            ledger: ledger, producer: sender, resultsTopic: "results", eventSource: "test", metrics: WorkerMetrics(),
            logger: Logger(label: "unclaimed-test", minimumLevel: .critical))

        sender.refusing.store(true, ordering: .relaxed)
        await credits.round()
        #expect(sender.sent.withLock { $0.isEmpty })

        sender.refusing.store(false, ordering: .relaxed)
        await credits.round()
        await credits.round()
        let sent = sender.sent.withLock { $0 }
        #expect(sent.count == 1)
        #expect(sent.first?.topic == "results" && sent.first?.key == Array("unclaimed:10".utf8))
        #expect(sent.first?.headers.first { $0.name == "ce_id" }?.stringValue == "credit-10")
        #expect(sent.first?.headers.contains { $0.name == "traceparent" } == true)
    }
}
