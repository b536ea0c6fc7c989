import AppStoreSimulator
import AppleVerification
import Crypto
import Foundation
import HTTPClient
import ReceiptWorker
import TestSupport
import Testing

/// `apple.receipt_verification=server_api` end to end: app receipts verified without verifyReceipt (the
/// simulator signs them with its test chain, which the worker is told to trust), their entry fetched with
/// Get Transaction Info.
@Suite("Receipts without verifyReceipt", .timeLimit(.minutes(3)))
struct ServerAPIReceiptsEndToEndTests {
    static let fixtures = MetricsEndpointTests.repositoryRoot.appendingPathComponent(
        "Tests/AppleVerificationTests/Fixtures")

    static func harness(allowSandbox: Bool = false) async throws -> WorkerHarness {
        try await WorkerHarness(allowSandbox: allowSandbox, notifications: true) { configuration in
            configuration.apple.receiptsWithServerAPI = true
        }
    }

    func requests(_ harness: WorkerHarness) async throws -> [String: Int] {
        let response = try await harness.http.execute(HTTPRequest(url: "\(harness.simulator.baseURL)/admin/stats"))
        return (try JSONSerialization.jsonObject(with: response.body) as? [String: Int]) ?? [:]
    }

    @Test(
        "a genuine receipt is granted with one Get Transaction Info and no verifyReceipt; an iOS 6 receipt still goes to verifyReceipt"
    )
    func genuine() async throws {
        let harness = try await Self.harness()
        let purchase = try await harness.purchase(["product_id": "gems_100"])
        try await harness.submit(job("genuine", order: "o-1", product: "gems_100", ["receipt": purchase.receipt]))
        let result = await harness.result(jobID: "genuine")
        #expect(result?["decision"] as? String == "grant")
        #expect(result?["transaction_id"] as? String == purchase.transactionID)
        var counts = try await requests(harness)
        #expect(counts["production.verifyReceipt"] == nil)
        #expect(counts["production.transactionInfo"] == 1)
        // The order's product is not in the receipt: transaction_not_found, without a call.
        try await harness.submit(job("other-product", order: "o-2", product: "coins_5", ["receipt": purchase.receipt]))
        #expect(await harness.result(jobID: "other-product")?["reason"] as? String == "transaction_not_found")
        let legacy = try await harness.purchase(["product_id": "gems_100", "receipt_style": "ios6"])
        try await harness.submit(job("ios6", order: "o-3", product: "gems_100", ["receipt": legacy.receipt]))
        #expect(await harness.result(jobID: "ios6")?["decision"] as? String == "grant")
        counts = try await requests(harness)
        #expect(counts["production.verifyReceipt"] == 1)
        #expect(counts["production.transactionInfo"] == 1)
        await harness.stop()
    }

    @Test(
        "a forged, a re-signed and a truncated receipt naming another player's transaction are invalid_receipt, never granted"
    )
    func hostile() async throws {
        let harness = try await Self.harness()
        let victim = try await harness.purchase(["product_id": "gems_100"])
        let mine = try await harness.purchase(["product_id": "gems_100"])
        var genuine = [UInt8](try #require(Data(base64Encoded: mine.receipt)))
        // Forged: my genuine receipt with the victim's transaction id written over mine (same length).
        let at = try #require(genuine.indices.first { genuine[$0...].starts(with: Array(mine.transactionID.utf8)) })
        genuine.replaceSubrange(at..<(at + mine.transactionID.count), with: Array(victim.transactionID.utf8))
        let forged = Data(genuine).base64EncodedString()
        // Re-signed: a receipt naming the victim's transaction, signed by a certificate under the trusted root
        // that is not the receipt-signing one (as any developer's certificate is under Apple's WWDR).
        let signer = try PKCS7Signer(
            keyPEM: try String(
                contentsOf: Self.fixtures.appendingPathComponent("chain/testIntermediate.key"), encoding: .utf8),
            certificatesPEM: try String(
                contentsOf: Self.fixtures.appendingPathComponent("chain/testIntermediate.pem"), encoding: .utf8))
        let reSigned = try signer.sign(Array(genuine)).base64EncodedString()
        let truncated = Data(try #require(Data(base64Encoded: victim.receipt)).prefix(300)).base64EncodedString()
        for (id, receipt) in [("forged", forged), ("re-signed", reSigned), ("truncated", truncated)] {
            try await harness.submit(
                job(
                    id, order: "order-\(id)", product: "gems_100",
                    ["receipt": receipt, "transaction_id": victim.transactionID]))
        }
        for id in ["forged", "re-signed", "truncated"] {
            let result = await harness.result(jobID: id)
            #expect(result?["decision"] as? String == "deny", "\(id)")
            #expect(result?["reason"] as? String == "invalid_receipt", "\(id): \(result?["detail"] ?? "")")
        }
        // Nothing was asked of Apple for them.
        let counts = try await requests(harness)
        #expect(counts["production.transactionInfo"] == nil && counts["production.verifyReceipt"] == nil)
        await harness.stop()
    }

    @Test("a Sandbox receipt is sandbox_not_allowed in Production, and granted where Sandbox is allowed")
    func sandbox() async throws {
        for allowed in [false, true] {
            let harness = try await Self.harness(allowSandbox: allowed)
            let purchase = try await harness.purchase(["product_id": "gems_100", "environment": "Sandbox"])
            try await harness.submit(job("sandbox", order: "o-s", product: "gems_100", ["receipt": purchase.receipt]))
            let result = await harness.result(jobID: "sandbox")
            #expect(result?["decision"] as? String == (allowed ? "grant" : "deny"))
            let counts = try await requests(harness)
            if allowed {
                // The receipt says Sandbox: only the Sandbox is asked.
                #expect(counts["sandbox.transactionInfo"] == 1 && counts["production.transactionInfo"] == nil)
            } else {
                // Denied at once: no Sandbox endpoint, and no Production one either.
                #expect(result?["reason"] as? String == "sandbox_not_allowed")
                #expect(result?["attempts"] as? Int == 0)
                #expect(counts["sandbox.transactionInfo"] == nil && counts["production.transactionInfo"] == nil)
            }
            await harness.stop()
        }
    }

    @Test(
        "a receipt signed by anyone whose creation date has a fraction of twelve digits is invalid_receipt; the worker goes on"
    )
    func forgedCreationDate() async throws {
        let harness = try await Self.harness()
        func element(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag, UInt8(content.count)] + content }
        func attribute(_ type: Int, _ value: [UInt8]) -> [UInt8] {
            element(0x30, [0x02, 0x02, UInt8(type >> 8), UInt8(type & 0xFF), 0x02, 0x01, 0x01] + element(0x04, value))
        }
        let payload = element(
            0x31,
            attribute(2, element(0x0C, Array("com.example".utf8)))
                + attribute(12, element(0x16, Array("2026-11-30T10:00:00.123456789012Z".utf8)))
                + attribute(17, element(0x31, attribute(1703, element(0x0C, Array("2000000000000001".utf8))))))
        let signer = try PKCS7Signer(
            keyPEM: try String(contentsOf: Self.fixtures.appendingPathComponent("chain/testCA.key"), encoding: .utf8),
            certificatesPEM: try String(
                contentsOf: Self.fixtures.appendingPathComponent("chain/testCA.pem"), encoding: .utf8))
        let forged = try signer.sign(payload).base64EncodedString()
        try await harness.submit(job("forged-date", order: "o-f", product: "gems_100", ["receipt": forged]))
        #expect(await harness.result(jobID: "forged-date")?["reason"] as? String == "invalid_receipt")
        let purchase = try await harness.purchase(["product_id": "gems_100"])
        try await harness.submit(job("after", order: "o-a", product: "gems_100", ["receipt": purchase.receipt]))
        #expect(await harness.result(jobID: "after")?["decision"] as? String == "grant")
        await harness.stop()
    }
}
