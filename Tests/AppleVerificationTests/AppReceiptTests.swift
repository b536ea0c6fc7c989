import Foundation
import Testing

@testable import AppleVerification

@Suite("App receipts (PKCS#7) read locally, with Apple's test receipts")
struct AppReceiptTests {
    // Entry counts as `openssl asn1parse` reads them (attributes of type 17 in the signed content).
    @Test(
        "Apple-signed sandbox receipts: bundle id and every in-app entry",
        arguments: [
            ("receipts/shoshins_ParsingTestZero.b64", 35), ("receipts/shoshins_ParsingTestOne.b64", 5),
            ("receipts/shoshins_ParsingTestTwo.b64", 7), ("receipts/shoshins_ParsingTestThree.b64", 1),
        ])
    func realReceipts(path: String, entries: Int) throws {
        let receipt = try #require(AppReceipt(base64: try Fixtures.text(path)))
        #expect(["com.mbaasy.ios.demo", "com.belive.app.ios"].contains(receipt.bundleID ?? ""))
        #expect(receipt.inApp.count == entries)
        #expect(receipt.inApp.allSatisfy { ($0.transactionID ?? "").allSatisfy(\.isNumber) && $0.transactionID != nil })
        #expect(receipt.inApp.allSatisfy { $0.productID != nil && $0.quantity != nil && $0.purchaseDate != nil })
    }

    @Test(
        "they verify against Apple's RSA root with time checks off, and not with them on, nor against G3",
        arguments: ["receipts/shoshins_ParsingTestZero.b64", "receipts/shoshins_ParsingTestThree.b64"])
    func realReceiptSignatures(path: String) throws {
        let receipt = try Fixtures.text(path)
        let rsaRoot = try Fixtures.data("receipts/apple_root_ca_rsa_2006_from_receipt.pem")
        #expect(AppReceipt.verifySignature(base64: receipt, roots: [rsaRoot], checkTime: false))
        #expect(!AppReceipt.verifySignature(base64: receipt, roots: [rsaRoot], checkTime: true))
        #expect(
            !AppReceipt.verifySignature(base64: receipt, roots: [AppleRootCertificates.appleRootCAG3], checkTime: false)
        )
    }

    @Test("Xcode receipts (BER, indefinite lengths): transaction id 0, or none; not signed by Apple")
    func xcodeReceipts() throws {
        let withTransaction = try #require(
            AppReceipt(base64: try Fixtures.text("xcode/xcode-app-receipt-with-transaction")))
        #expect(withTransaction.inApp.first?.transactionID == "0")
        let empty = try #require(AppReceipt(base64: try Fixtures.text("xcode/xcode-app-receipt-empty")))
        #expect(empty.inApp.isEmpty)
        let rsaRoot = try Fixtures.data("receipts/apple_root_ca_rsa_2006_from_receipt.pem")
        #expect(
            !AppReceipt.verifySignature(
                base64: try Fixtures.text("xcode/xcode-app-receipt-empty"), roots: [rsaRoot], checkTime: false))
    }

    @Test("anything else is not an app receipt", arguments: ["", "bm90IGEgcmVjZWlwdA==", "%%%"])
    func notReceipts(text: String) {
        #expect(AppReceipt(base64: text) == nil)
    }
}
