import AppleVerification
import Flows
import Foundation
import Ledger
@testable import ReceiptWorker
@testable import Support
import Testing
import Vocabulary

/// The line `receipt-worker lookup` names a purchase's case with, from Apple's view and the ledger's, in
/// milliseconds; and what it never prints.
@Suite("Support lookup: the case of a purchase, and what the report never shows")
struct LookupReportTests {
    static let token = "6f1c2b7e-4a0d-4c9e-8b3a-2d5e7f9a1c04"

    func purchase(
        environment: AppleEnvironment = .production, revoked: Date? = nil, revocationType: String? = nil,
        percentage: Int? = nil, record: SupportRecord = SupportRecord(), sandboxAccepted: Bool = false,
        ownership: String = "PURCHASED"
    ) throws -> LookupReport.Purchase {
        var payload = JWSTransaction()
        payload.transactionId = "2000000000000042"
        payload.productId = "gems_500"
        payload.type = "Consumable"
        payload.price = 4990
        payload.currency = "EUR"
        payload.appAccountToken = Self.token
        payload.revocationDate = revoked.map { $0.timeIntervalSince1970 * 1000 }
        payload.revocationType = revocationType.map(RevocationType.init)
        payload.revocationPercentage = percentage
        payload.inAppOwnershipType = InAppOwnershipType(rawValue: ownership)
        return LookupReport.Purchase(
            transaction: try AppleTransaction(payload), payload: payload, environment: environment, record: record,
            sandboxAccepted: sandboxAccepted)
    }

    static let day = Date(timeIntervalSince1970: 1_796_000_000)  // 2026-11-30

    @Test(
        "a family member's access is never support's to credit; a purchase refunded in part, no order's, is: the rest")
    func familyAndPartlyRefunded() throws {
        let family = try purchase(ownership: "FAMILY_SHARED").verdict
        #expect(family.hasPrefix("a family member's access (Family Sharing, nothing paid for it): nothing to credit"))
        #expect(!family.contains("credit it"))
        let partly = try purchase(revoked: Self.day, revocationType: "REFUND_PRORATED", percentage: 33_333).verdict
        #expect(partly.hasPrefix("refunded in part on 2026-11-30 (33.333 %), never claimed: credit the rest"))
        #expect(
            try purchase(revoked: Self.day, revocationType: "REFUND_FULL", percentage: 100_000).verdict
                == "refunded on 2026-11-30 (100 %)")
    }

    @Test("each case in support's words, the first that applies")
    func verdicts() throws {
        let grant = SupportRecord.Grant(
            orderID: "shop-7", userID: "player-4", transactionID: "2000000000000042", grantedAt: Self.day,
            revokedAt: nil, credit: .job)
        #expect(
            try purchase(record: SupportRecord(grant: grant)).verdict
                == "paid, granted to order shop-7 of player player-4 on 2026-11-30")
        #expect(try purchase().verdict == "paid, never claimed: credit it (receipt-worker credit)")
        let waiting = SupportRecord.Report(
            state: "waiting", dueAt: Self.day, eventID: "e1", published: false, settledAt: nil)
        #expect(
            try purchase(record: SupportRecord(report: waiting)).verdict.hasPrefix(
                "paid, waiting for its job until 2026-11-30"))
        let credited = SupportRecord.Report(
            state: "credited", dueAt: Self.day, eventID: "e2", published: true, settledAt: Self.day)
        #expect(
            try purchase(record: SupportRecord(report: credited)).verdict.hasPrefix(
                "paid, never claimed: credited unclaimed on 2026-11-30 (event e2)"))
        let refunded = try purchase(
            revoked: Self.day, revocationType: "REFUND_PRORATED", percentage: 40_000,
            record: SupportRecord(grant: grant))
        #expect(refunded.verdict == "refunded on 2026-11-30 (40 %), was granted to order shop-7 of player player-4")
        #expect(
            try purchase(revoked: Self.day, revocationType: "FAMILY_REVOKE").verdict.hasPrefix(
                "revoked (Family Sharing)"))
        #expect(try purchase(environment: .sandbox).verdict.hasPrefix("Sandbox: a tester's purchase"))
        #expect(
            try purchase(environment: .sandbox, sandboxAccepted: true).verdict.hasPrefix(
                "Sandbox (a tester's, no money): paid, never claimed"))
    }

    @Test("the table and the JSON never hold the app account token in full; prices read as money")
    func safeToHandOver() throws {
        var report = LookupReport(query: SupportDesk.Query.appAccountToken(Self.token).shown, bundleID: "com.example")
        report.purchases = [try purchase()]
        let printed = report.table() + String(decoding: report.json(), as: UTF8.self)
        #expect(!printed.contains(Self.token) && printed.contains("6f1c2b7e"), "\(printed)")
        #expect(report.table().contains("4.99 EUR"))
        #expect(LookupReport.amount(milliunits: 990) == "0.99" && LookupReport.amount(milliunits: 1234) == "1.234")
        #expect(LookupReport.amount(milliunits: .min).hasPrefix("-9223372036854775.80"))
        let json = try #require(try JSONSerialization.jsonObject(with: report.json()) as? [String: Any])
        #expect(json["summary"] as? String == "paid, never claimed: credit it (receipt-worker credit)")
    }

    @Test(
        "Finish Transaction reads a grant's transaction, environment and app from the event; anything else is skipped")
    func finisherFields() throws {
        let event = Data(
            #"{"event_id":"e","type":"receipt.granted","transaction_id":"2000000000000042","environment":"Sandbox","bundle_id":"com.example"}"#
                .utf8)
        let fields = try #require(TransactionFinisher.fields(Array(event)))
        #expect(fields.transactionID == "2000000000000042" && fields.environment == .sandbox)
        #expect(fields.bundleID == "com.example" && fields.originalTransactionID == nil)
        #expect(TransactionFinisher.fields(Array("not json".utf8)) == nil)
        // A field written null is absent, never the text between its first and last byte.
        let nulls = try #require(
            TransactionFinisher.fields(
                Array(#"{"transaction_id":null,"original_transaction_id":"7","environment":null}"#.utf8)))
        #expect(nulls.transactionID == nil && nulls.environment == nil && nulls.originalTransactionID == "7")
    }
}
