import Foundation
import Testing

@testable import AppleVerification

/// verifyReceipt answers, app receipts and iOS 6 receipts holding what Apple never sends. An `http://` URL,
/// a proxy or a test double can send them; none may crash the worker or be read as a grant.
@Suite("Receipts with hostile numbers, bytes and disagreements")
struct HostileReceiptTests {
    /// A plain entry: JSON values, as text.
    static let entry: [String: String] = [
        "transaction_id": #""1000000000000001""#, "original_transaction_id": #""1000000000000001""#,
        "product_id": #""coins.100""#, "quantity": #""1""#, "purchase_date_ms": #""1697679930000""#,
    ]

    static func entry(_ changes: [String: String?] = [:]) -> String {
        var fields = entry
        for (name, value) in changes { fields[name] = value }
        return "{" + fields.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
    }

    static func verdict(inApp: [String], latest: [String]? = nil) throws -> AppleVerdict {
        var json = #"{"status":0,"environment":"Production","receipt":{"bundle_id":"com.example","in_app":["#
        json += inApp.joined(separator: ",") + "]}"
        if let latest { json += #","latest_receipt_info":["# + latest.joined(separator: ",") + "]" }
        json += "}"
        let response = try VerifyReceiptResponse(json: Array(json.utf8))
        return AppleVerifier.verdict(onReceipt: response, environment: "Production", bundleID: "com.example")
    }

    @Test("a plain entry is verified, with its dates")
    func plainEntry() throws {
        let purchase = try #require(try Self.verdict(inApp: [Self.entry()]).purchase)
        #expect(purchase.transactions.count == 1)
        #expect(purchase.transactions.first?.purchaseDate == Date(timeIntervalSince1970: 1_697_679_930))
        #expect(purchase.transactions.first?.revocationDate == nil)
    }

    @Test(
        "a date or quantity that is no number, or no time from 1970 to 9999, makes the receipt invalid, never a grant",
        arguments: [
            ("purchase_date_ms", #""1e30""#), ("expires_date_ms", #""-9999999999999999999""#),
            ("cancellation_date_ms", #""1e30""#), ("cancellation_date_ms", #""nan""#),
            ("cancellation_date_ms", #""inf""#), ("cancellation_date_ms", #""0x1p40""#),
            ("cancellation_date_ms", #""""#), ("cancellation_date_ms", #""soon""#),
            ("cancellation_date_ms", #"" 1697679930000""#), ("cancellation_date_ms", "1e30"),
            ("cancellation_date_ms", "true"), ("cancellation_date_ms", "{}"),
            ("expires_date_ms", #""253402300800000""#), ("quantity", #""99999999999999999999""#),
            ("quantity", #""-1""#), ("quantity", #""1.5""#), ("quantity", "1e30"), ("quantity", "[1]"),
        ])
    func hostileField(field: String, value: String) throws {
        let verdict = try Self.verdict(inApp: [Self.entry([field: value])])
        #expect(verdict.reason == "invalid_receipt")
    }

    @Test(
        "dates as numbers (old receipts) and with fractional milliseconds are read",
        arguments: ["1697679930000", #""1697679930000.5""#, "1697679930000.5"])
    func numericAndFractionalDates(value: String) throws {
        let purchase = try #require(try Self.verdict(inApp: [Self.entry(["cancellation_date_ms": value])]).purchase)
        let revoked = try #require(purchase.transactions.first?.revocationDate)
        #expect(abs(revoked.timeIntervalSince1970 - 1_697_679_930) < 0.001)
    }

    @Test(
        "in_app and latest_receipt_info disagree on a cancellation: the cancellation wins, whichever list has it",
        arguments: [true, false])
    func cancellationWins(inInApp: Bool) throws {
        let cancelled = Self.entry([
            "cancellation_date_ms": #""1697679940000""#, "web_order_line_item_id": #""3000000000000001""#,
        ])
        let plain = Self.entry()
        let verdict = try Self.verdict(inApp: [inInApp ? cancelled : plain], latest: [inInApp ? plain : cancelled])
        let purchase = try #require(verdict.purchase)
        #expect(purchase.transactions.count == 1)
        let transaction = try #require(purchase.select(transactionID: "1000000000000001", productID: "coins.100"))
        #expect(transaction.revocationDate == Date(timeIntervalSince1970: 1_697_679_940))
        #expect(purchase.select(transactionID: nil, productID: "coins.100")?.revocationDate != nil)
        #expect(transaction.webOrderLineItemID == "3000000000000001")
    }

    @Test("of two cancellations of one transaction, the earlier is kept")
    func earlierCancellation() throws {
        let verdict = try Self.verdict(
            inApp: [Self.entry(["cancellation_date_ms": #""1697679950000""#])],
            latest: [Self.entry(["cancellation_date_ms": #""1697679940000""#])])
        let transaction = try #require(verdict.purchase?.transactions.first)
        #expect(transaction.revocationDate == Date(timeIntervalSince1970: 1_697_679_940))
    }

    @Test("ASN.1 nested past any receipt's depth is no element, read without exhausting the stack")
    func deepIndefiniteLengths() {
        let depth = 100_000
        let nested = [UInt8](repeating: 0, count: depth * 4)
        var bytes = nested
        for level in 0..<depth {
            bytes[level * 2] = 0x30
            bytes[level * 2 + 1] = 0x80
        }
        var reader = ASN1Reader(bytes[...])
        #expect(reader.next() == nil)

        let shallow: [UInt8] = [0x30, 0x80, 0x30, 0x80, 0x04, 0x01, 0x2A, 0x00, 0x00, 0x00, 0x00]
        var shallowReader = ASN1Reader(shallow[...])
        let element = shallowReader.next()
        #expect(element?.tag == 0x30)
        #expect(element.map { Array($0.content) } == [0x30, 0x80, 0x04, 0x01, 0x2A, 0x00, 0x00])
    }

    @Test(
        "ASN.1 lengths past the end, or longer than four bytes, are no element",
        arguments: [
            [0x04, 0x84, 0xFF, 0xFF, 0xFF, 0xFF, 0x00], [0x04, 0x85, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00],
            [0x04, 0x82, 0x01], [0x04, 0x05, 0x01], [0x1F, 0x01, 0x00], [0x30, 0x80, 0x04, 0x00],
        ] as [[UInt8]])
    func hostileLengths(bytes: [UInt8]) {
        var reader = ASN1Reader(bytes[...])
        #expect(reader.next() == nil)
        #expect(ASN1Reader.integer([]) == nil)
        #expect(ASN1Reader.integer([0x80, 0, 0, 0, 0, 0, 0, 0]) == Int.min)
    }

    @Test("an app receipt whose signed content is not data is not read; the same receipt with data is")
    func receiptContentType() throws {
        let control = try #require(AppReceipt(base64: try Fixtures.text("hostile/receipt_test_chain.b64")))
        #expect(control.bundleID == "com.example")
        #expect(control.inApp.map(\.transactionID) == ["1000000000000001"])
        #expect(AppReceipt(base64: try Fixtures.text("hostile/receipt_content_not_data.b64")) == nil)
    }

    @Test(
        "an iOS 6 receipt cut short anywhere names no transaction",
        arguments: [
            #"{ "purchase-info" = "#, #"{ "purchase-info" "#, #"{ "purchase-info" = "%%%"; }"#,
            #"{ "purchase-info" = "eyAidHJhbnNhY3Rpb24taWQiID0gIg=="; }"#, #"""#, "",
        ])
    func truncatedLegacyReceipt(text: String) {
        #expect(LegacyTransactionReceipt.transactionID(fromBase64: Data(text.utf8).base64EncodedString()) == nil)
    }
}
