import AppStoreSimulator
import Foundation
import Kafka
import Testing
import TestSupport

@testable import ReceiptWorker
import Flows
import Observability

/// The ledger a test's worker runs on.
enum LedgerKind: String, CaseIterable, Sendable { case sqlite, postgresql }

extension WorkerHarness {
    /// A harness with notifications on a ledger of `kind` (PostgreSQL: a fresh database).
    static func on(_ kind: LedgerKind, allowSandbox: Bool = false) async throws -> WorkerHarness {
        let url = kind == .postgresql ? try makePostgresDatabase() : nil
        return try await WorkerHarness(allowSandbox: allowSandbox, notifications: true) { configuration in
            if let url { configuration.ledgerURL = url }
        }
    }
}

/// The money paths a fraud reviewer and a finance auditor try (docs/contract.md sections 4 and 9), over the wire:
/// the broker, the simulator over HTTP, the worker on each ledger, and support's commands as the binary.
@Suite("Money end to end: delivery, revenue and support's commands, on SQLite and PostgreSQL")
struct MoneyEndToEndTests {

    func harness(_ kind: LedgerKind, allowSandbox: Bool = false) async throws -> WorkerHarness {
        try await WorkerHarness.on(kind, allowSandbox: allowSandbox)
    }

    /// Waits for the first event of `type` for `order`.
    func event(_ harness: WorkerHarness, order: String, type: String) async -> [String: Any]? {
        _ = await eventually(timeout: .seconds(60)) {
            harness.events(orderID: order).contains { $0["type"] as? String == type }
        }
        return harness.events(orderID: order).first { $0["type"] as? String == type }
    }

    @Test(
        "three packs granted, one refunded: the consumption answer that says no delivery_status, with DECLINE, tells Apple DELIVERED",
        arguments: LedgerKind.allCases)
    func partialRefundStaysDelivered(kind: LedgerKind) async throws {
        let harness = try await harness(kind)
        let bought = try await harness.purchase(["product_id": "gems_100", "quantity": 3, "price": 2990])
        try await harness.submit(
            job(
                "job-g", order: "order-g", product: "gems_100", ["signed_transaction": bought.signedTransaction],
                quantity: 3))
        #expect(await harness.result(jobID: "job-g")?["decision"] as? String == "grant")
        _ = try await harness.admin.notify("refund", ["transaction_id": bought.transactionID, "percentage": 33.333])
        let revoked = await event(harness, order: "order-g", type: "receipt.revoked")
        #expect(revoked?["revenue"] as? Int == -997, "a third of 2.99 taken back")
        _ = try await harness.admin.notify(
            "consumption-request", ["transaction_id": bought.transactionID, "reason": "UNSATISFIED_WITH_PURCHASE"])
        #expect(await event(harness, order: "order-g", type: "receipt.consumption_requested") != nil)
        try await harness.answerConsumption([
            "transaction_id": bought.transactionID, "customer_consented": true, "sample_content_provided": false,
            "refund_preference": "DECLINE", "bundle_id": "com.example",
        ])
        #expect(await eventually(timeout: .seconds(60)) { (try? await harness.admin.consumptionAnswers().count) == 1 })
        let sent = try #require(try await harness.admin.consumptionAnswers().first)
        let body = try #require(sent["body"] as? [String: Any])
        #expect(body["deliveryStatus"] as? String == "DELIVERED", "the two packs the player holds were delivered")
        #expect(body["refundPreference"] as? String == "DECLINE")
        #expect(harness.deadLetters.isEmpty)
        await harness.stop()
    }

    @Test(
        "a purchase proved with a receipt and refunded nets nothing: its grant counted 0, its refund takes back 0 though Apple's refund says a price",
        arguments: LedgerKind.allCases)
    func receiptEraRefund(kind: LedgerKind) async throws {
        let harness = try await harness(kind)
        let bought = try await harness.purchase(["product_id": "coins_100", "price": 1990])
        try await harness.submit(job("job-r", order: "order-r", product: "coins_100", ["receipt": bought.receipt]))
        let grant = try #require(await harness.result(jobID: "job-r"))
        #expect(grant["decision"] as? String == "grant" && grant["price"] is NSNull && grant["revenue"] as? Int == 0)
        _ = try await harness.admin.notify("refund", ["transaction_id": bought.transactionID])
        let revoked = try #require(await event(harness, order: "order-r", type: "receipt.revoked"))
        #expect(revoked["price"] as? Int == 1990, "Apple's price, passed on")
        #expect(revoked["revenue"] as? Int == 0, "nothing taken back: the sale counted nothing")
        await harness.stop()
    }

    @Test(
        "a tester's Sandbox purchase, granted while Sandbox is accepted, counts no revenue; Production beside it does",
        arguments: LedgerKind.allCases)
    func sandboxIsNoRevenue(kind: LedgerKind) async throws {
        let harness = try await harness(kind, allowSandbox: true)
        let tester = try await harness.purchase(["product_id": "vip", "price": 9990, "environment": "Sandbox"])
        let player = try await harness.purchase(["product_id": "vip", "price": 9990])
        try await harness.submit(
            job("job-s", order: "order-s", product: "vip", ["signed_transaction": tester.signedTransaction]))
        try await harness.submit(
            job("job-p", order: "order-p", product: "vip", ["signed_transaction": player.signedTransaction]))
        let sandbox = try #require(await harness.result(jobID: "job-s"))
        #expect(sandbox["environment"] as? String == "Sandbox" && sandbox["price"] as? Int == 9990)
        #expect(sandbox["revenue"] as? Int == 0)
        #expect(await harness.result(jobID: "job-p")?["revenue"] as? Int == 9990)
        await harness.stop()
    }

    @Test(
        "three packs bought while the app crashed, one refunded before any order held them: the job is granted and the refunded third taken back at once; support credits another such purchase the same way",
        arguments: LedgerKind.allCases)
    func partlyRefundedBeforeAnyGrant(kind: LedgerKind) async throws {
        let harness = try await harness(kind)
        let bought = try await harness.purchase(["product_id": "gems_100", "quantity": 3, "price": 2990])
        _ = try await harness.admin.notify("refund", ["transaction_id": bought.transactionID, "percentage": 33.333])
        _ = await eventually(timeout: .seconds(60)) {
            harness.worker.metrics.registry.render().contains(
                "receipt_worker_notifications_processed_total{outcome=\"not_granted\",type=\"REFUND\"} 1")
        }
        try await harness.submit(
            job(
                "job-c", order: "order-c", product: "gems_100", ["signed_transaction": bought.signedTransaction],
                quantity: 3))
        _ = await eventually(timeout: .seconds(60)) { harness.distinctEvents(orderID: "order-c").count >= 2 }
        let events = harness.distinctEvents(orderID: "order-c")
        #expect(events.map { $0["type"] as? String } == ["receipt.granted", "receipt.revoked"], "\(events)")
        #expect(events.first?["quantity"] as? Int == 3 && events.first?["revenue"] as? Int == 2990)
        #expect(events.last?["revenue"] as? Int == -997 && events.last?["notification_id"] is NSNull)
        // Support's credit of another such purchase: the same grant and the same follow-up.
        let other = try await harness.purchase(["product_id": "gems_100", "quantity": 3, "price": 2990])
        _ = try await harness.admin.notify("refund", ["transaction_id": other.transactionID, "percentage": 33.333])
        _ = await eventually(timeout: .seconds(60)) {
            harness.worker.metrics.registry.render().contains(
                "receipt_worker_notifications_processed_total{outcome=\"not_granted\",type=\"REFUND\"} 2")
        }
        let invoice = try #require(
            try await harness.supportTool([
                "lookup", "--by", "support-ana", "--transaction-id", other.transactionID, "--json",
            ]).output
                .components(separatedBy: "\"").first { $0.hasPrefix("refunded in part") })
        #expect(invoice.contains("credit the rest"))
        let credited = try await harness.supportTool([
            "credit", "--transaction-id", other.transactionID, "--order-id", "support-c", "--user-id", "player-3",
            "--by", "agent", "--reason", "ticket", "--apple-order-id",
            try await harness.appleOrderID(other.transactionID),
        ])
        #expect(credited.status == 0 && credited.output.contains("taken back at once"), "\(credited.errors)")
        _ = await eventually(timeout: .seconds(60)) { harness.distinctEvents(orderID: "support-c").count >= 2 }
        let supported = harness.distinctEvents(orderID: "support-c")
        #expect(supported.map { $0["type"] as? String } == ["receipt.granted", "receipt.revoked"], "\(supported)")
        #expect(supported.last?["revocation_percentage"] as? Double == 33.333)
        await harness.stop()
    }

    @Test("lookup never tells support to credit a family member's access; credit refuses it, recording nothing")
    func familySharedIsNotSupportsToCredit() async throws {
        let harness = try await harness(.sqlite)
        let family = try await harness.purchase(["product_id": "remove_ads", "family_shared": true])
        let lookup = try await harness.supportTool([
            "lookup", "--by", "support-ana", "--transaction-id", family.transactionID,
        ])
        #expect(lookup.status == 0, "\(lookup.errors)")
        #expect(lookup.output.contains("a family member's access (Family Sharing, nothing paid for it)"))
        #expect(!lookup.output.contains("credit it"))
        let credit = try await harness.supportTool([
            "credit", "--transaction-id", family.transactionID, "--order-id", "support-1", "--user-id", "p1", "--by",
            "agent", "--reason", "r", "--apple-order-id", "NOPE",
        ])
        #expect(credit.status == 3 && credit.errors.contains("a family member's access"), "\(credit.errors)")
        #expect(harness.events(orderID: "support-1").isEmpty)
        await harness.stop()
    }

    @Test(
        "lookup and credit answer when PostgreSQL does not: refused, or accepting and saying nothing, each exits 1 saying the ledger did not answer"
    )
    func toolsNeverHang() async throws {
        let harness = try await harness(.sqlite)
        // A port nothing listens on, and a listener that accepts and never answers.
        let refused = try freeLoopbackPort()
        let silent = try SilentListener()
        async let lookup = harness.supportTool(
            ["lookup", "--by", "support-ana", "--transaction-id", "2000000000000001"],
            ledgerURL: "postgresql://u:pa55word@127.0.0.1:\(refused)/db")
        async let credit = harness.supportTool(
            [
                "credit", "--transaction-id", "2000000000000001", "--order-id", "o", "--user-id", "p", "--by", "a",
                "--reason", "r", "--apple-order-id", "X",
            ], ledgerURL: "postgresql://u:pa55word@127.0.0.1:\(silent.port)/db")
        let (looked, credited) = try await (lookup, credit)
        for run in [looked, credited] {
            #expect(run.status == 1, "\(run.errors)")
            #expect(run.errors.contains("did not answer within"), "\(run.errors)")
            #expect(!run.errors.contains("pa55word"), "no secret in the message")
        }
        silent.close()
        await harness.stop()
    }
}

/// A TCP listener on loopback that never accepts: the kernel completes connections into its backlog, and nothing
/// ever answers (a database host that hangs).
final class SilentListener: Sendable {
    let port: UInt16
    private let descriptor: Int32

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 16) == 0 else { throw TestSupportError("cannot listen on loopback") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        self.descriptor = descriptor
        port = UInt16(bigEndian: address.sin_port)
    }

    func close() { _ = Glibc.close(descriptor) }
}

extension WorkerHarness {
    /// The order id on the invoice Apple sent for a transaction (the simulator's Look Up Order ID key).
    func appleOrderID(_ transactionID: String) async throws -> String {
        let state = try await admin.call("transactions/\(transactionID)", [:])
        guard let order = state["order_id"] as? String else {
            throw TestSupportError("no order id for \(transactionID)")
        }
        return order
    }
}
