import Foundation
import Ledger
import LedgerDomain
import ReceiptWorker
import TestSupport
import Testing
import Vocabulary

/// Amends after an outage, end to end on each ledger: `receipt-worker extend` (the binary) asks the simulator over
/// HTTP, the simulator sends Apple's notifications to the worker's receiver through a real broker, and the grant
/// service's events say what each extension did.
@Suite("Subscription extensions end to end, on SQLite and PostgreSQL", .timeLimit(.minutes(4)))
struct ExtensionEndToEndTests {
    func harness(_ kind: LedgerKind) async throws -> WorkerHarness { try await WorkerHarness.on(kind) }

    /// A subscription of `product` granted to `order`; its original transaction id.
    func subscribed(_ harness: WorkerHarness, order: String, product: String = "vip_monthly") async throws
        -> (id: String, expires: Date)
    {
        let bought = try await harness.purchase(["product_id": product, "type": "subscription"])
        try await harness.submit(
            job("job-\(order)", order: order, product: product, ["signed_transaction": bought.signedTransaction]))
        let granted = try #require(await harness.result(jobID: "job-\(order)"))
        #expect(granted["decision"] as? String == "grant")
        let expires = try #require((granted["expires_date"] as? String).flatMap(Self.time))
        return (bought.transactionID, expires)
    }

    /// The extension events of `order`, once there are `count`.
    func extended(_ harness: WorkerHarness, order: String, count: Int) async -> [[String: Any]] {
        let matching = {
            harness.events(orderID: order).filter {
                $0["type"] as? String == "receipt.renewal_changed"
                    && $0["notification_type"] as? String == "RENEWAL_EXTENDED"
            }
        }
        _ = await eventually(timeout: .seconds(60)) { matching().count >= count }
        return matching()
    }

    static func time(_ text: String) -> Date? { RFC3339.parse(text) }

    static let day: TimeInterval = 86_400

    @Test(
        "one subscription extended by a day, then two: each a receipt.renewal_changed with expires_at moved; the third in a year refused with Apple's reason; the same request again extends nothing twice; every one audited",
        arguments: LedgerKind.allCases)
    func oneSubscription(kind: LedgerKind) async throws {
        let harness = try await harness(kind)
        let (original, expires) = try await subscribed(harness, order: "vip-1")
        func extend(days: Int, request: String) async throws -> CommandLineRun {
            try await harness.supportTool([
                "extend", "--original-transaction-id", original, "--days", String(days), "--reason", "service_issue",
                "--by", "support-ana", "--ticket", "OUT-7", "--request-id", request,
            ])
        }

        let first = try await extend(days: 1, request: "outage-1")
        #expect(first.status == 0 && first.output.contains("extended"), "\(first.output) \(first.errors)")
        let once = try #require(await extended(harness, order: "vip-1", count: 1).first)
        let movedOnce = try #require((once["expires_at"] as? String).flatMap(Self.time))
        #expect(abs(movedOnce.timeIntervalSince(expires) - Self.day) < 1, "a day later: \(once)")
        #expect(once["status"] as? String == "active" && once["user_id"] as? String == "player-1")

        let second = try await extend(days: 2, request: "outage-2")
        #expect(second.status == 0, "\(second.errors)")
        let twice = await extended(harness, order: "vip-1", count: 2)
        let lastExpiry: String? = twice.last?["expires_at"] as? String
        let movedTwice = try #require(lastExpiry.flatMap(Self.time))
        #expect(abs(movedTwice.timeIntervalSince(expires) - 3 * Self.day) < 1, "three days later in all")

        let third = try await extend(days: 1, request: "outage-3")
        #expect(third.status == 3, "\(third.output)")
        #expect(third.errors.contains("extended twice in the last 365 days") && third.errors.contains("4030005"))

        // The second request again (a timeout, say): Apple's same answer, nothing extended twice.
        let again = try await extend(days: 2, request: "outage-2")
        #expect(again.status == 0 && again.output.contains(RFC3339.format(movedTwice)), "\(again.output)")
        try await Task.sleep(for: .seconds(2))
        #expect(await extended(harness, order: "vip-1", count: 2).count == 2, "no third event")

        let lines = try await harness.configuration.withToolLedger { ledger in
            try await ledger.audit(AuditFilter(action: "extend", limit: 10))
        }
        #expect(lines.map(\.outcome) == ["extended", "refused", "extended", "extended"], "newest first")
        #expect(lines.allSatisfy { $0.agent == "cli:support-ana" && $0.ticket == "OUT-7" })
        #expect(lines[1].answer.contains("4030005"))

        // A request whose answer was lost (audited `failed`: Apple may have taken it) is not sent again under a new
        // identifier by the same command run again without one; with its identifier it is.
        let lost =
            #"{"days":2,"original_transaction_id":"\#(original)","reason":"service_issue","request_id":"outage-2"}"#
        _ = try await harness.configuration.withToolLedger { ledger in
            try await ledger.appendAudit(
                AuditEntry(
                    at: Date(), app: "default", agent: "cli:support-ana", agentName: "support-ana", role: "operator",
                    action: "extend", outcome: "failed", ticket: "OUT-8", player: nil,
                    request: lost,
                    answer: #"{"error":"Apple did not answer"}"#))
        }
        let plain = try await harness.supportTool([
            "extend", "--original-transaction-id", original, "--days", "2", "--reason", "service_issue", "--by",
            "support-ana",
        ])
        #expect(plain.status == 3 && plain.errors.contains("--request-id outage-2"), "\(plain.output) \(plain.errors)")
        // Another request (another number of days) is not held back by it.
        let other = try await harness.supportTool([
            "extend", "--original-transaction-id", original, "--days", "3", "--reason", "service_issue", "--by",
            "support-ana",
        ])
        #expect(!other.errors.contains("--request-id outage-2"), "\(other.errors)")
        let named = try await extend(days: 2, request: "outage-2")
        #expect(named.status == 0 && named.output.contains(RFC3339.format(movedTwice)), "\(named.errors)")
        // Sent again with its identifier and answered: settled, the same command without one is no longer refused.
        let settledAgain = try await harness.supportTool([
            "extend", "--original-transaction-id", original, "--days", "2", "--reason", "service_issue", "--by",
            "support-ana",
        ])
        #expect(!settledAgain.errors.contains("--request-id outage-2"), "\(settledAgain.errors)")
        await harness.stop()
    }

    @Test(
        "every subscriber of a product extended, one already extended twice: followed to its end (2 extended, 1 not), each extended a receipt.renewal_changed, the one not a receipt.extension_failed, the end one receipt.extension_completed keyed by the request",
        arguments: LedgerKind.allCases)
    func allSubscribers(kind: LedgerKind) async throws {
        let harness = try await harness(kind)
        var expiries: [String: Date] = [:]
        var originals: [String: String] = [:]
        for order in ["vip-a", "vip-b", "vip-c"] {
            let (id, expires) = try await subscribed(harness, order: order)
            (originals[order], expiries[order]) = (id, expires)
        }
        // Another product's subscriber is not touched.
        _ = try await subscribed(harness, order: "gold-d", product: "gold_monthly")
        for request in ["before-1", "before-2"] {
            let run = try await harness.supportTool([
                "extend", "--original-transaction-id", try #require(originals["vip-c"]), "--days", "1",
                "--reason", "customer_satisfaction", "--by", "support-ana", "--request-id", request,
            ])
            #expect(run.status == 0, "\(run.errors)")
        }
        _ = await extended(harness, order: "vip-c", count: 2)

        let request = UUID().uuidString.lowercased()
        let started = try await harness.supportTool([
            "extend", "--all", "--product-id", "vip_monthly", "--storefronts", "USA", "--days", "3", "--reason",
            "service_issue", "--by", "support-lead", "--request-id", request,
        ])
        #expect(started.status == 0 && started.output.contains("started: request \(request)"), "\(started.errors)")
        let followed = try await harness.supportTool(
            ["extend", "--status", "--product-id", "vip_monthly", "--request-id", request, "--follow"],
            environment: ["RECEIPT_WORKER_EXTEND_FOLLOW_MS": "200"])
        #expect(followed.status == 0, "\(followed.errors)")
        #expect(followed.output.contains("2 extended, 1 not extended"), "\(followed.output)")

        for order in ["vip-a", "vip-b"] {
            let moved = try #require(await extended(harness, order: order, count: 1).first)
            let expires = try #require((moved["expires_at"] as? String).flatMap(Self.time))
            #expect(abs(expires.timeIntervalSince(try #require(expiries[order])) - 3 * Self.day) < 1)
        }
        _ = await eventually(timeout: .seconds(60)) {
            harness.events(orderID: "vip-c").contains { $0["type"] as? String == "receipt.extension_failed" }
        }
        let failed = try #require(
            harness.events(orderID: "vip-c").first { $0["type"] as? String == "receipt.extension_failed" })
        #expect(failed["notification_subtype"] as? String == "FAILURE")
        let unmoved = try #require((failed["expires_at"] as? String).flatMap(Self.time))
        #expect(abs(unmoved.timeIntervalSince(try #require(expiries["vip-c"])) - 2 * Self.day) < 1, "its own two")

        _ = await eventually(timeout: .seconds(60)) {
            !harness.resultEvents(type: "receipt.extension_completed").isEmpty
        }
        let completed = harness.resultEvents(type: "receipt.extension_completed")
        #expect(completed.count == 1)
        let summary = try #require(completed.first)
        #expect(
            summary["request_identifier"] as? String == request && summary["product_id"] as? String == "vip_monthly")
        #expect(summary["succeeded_count"] as? Int == 2 && summary["failed_count"] as? Int == 1)
        #expect(summary["storefront_country_codes"] as? [String] == ["USA"])
        #expect(!harness.events(orderID: "gold-d").contains { $0["type"] as? String != "receipt.granted" })
        #expect(harness.deadLetters.isEmpty)
        await harness.stop()
    }
}
