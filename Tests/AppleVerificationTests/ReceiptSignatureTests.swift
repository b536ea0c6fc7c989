@testable import AppleVerification
import Crypto
import Foundation
import Testing
import Vocabulary

/// `apple.receipt_verification=server_api`: an app receipt is trusted only when Apple's receipt-signing
/// certificate signed it (docs/contract.md section 10).
@Suite("App receipts verified locally: the signer, its chain at the creation date, the signature")
struct ReceiptSignatureTests {
    static func testChain() throws -> ReceiptSignatureVerifier {
        try ReceiptSignatureVerifier(rootCertificates: [try Fixtures.data("chain/testCA.pem")])
    }

    /// The receipt ASN.1 of one purchase, as the simulator makes it, signed by `keyFile` / `certificates`.
    static func receipt(transactionID: String = "2000000000000001", key: String, certificates: [String]) throws
        -> String
    {
        let signer = try PKCS7Signer(
            keyPEM: try Fixtures.text(key),
            certificatesPEM: try certificates.map { try Fixtures.text($0) }.joined(separator: "\n"))
        return try signer.sign(payload(transactionID: transactionID)).base64EncodedString()
    }

    static func payload(transactionID: String, created: String = "2026-11-30T10:00:00Z", type: String? = nil)
        -> [UInt8]
    {
        func element(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag, UInt8(content.count)] + content }
        // SEQUENCE { INTEGER type (two bytes), INTEGER 1, OCTET STRING value }
        func attribute(_ type: Int, _ value: [UInt8]) -> [UInt8] {
            element(0x30, [0x02, 0x02, UInt8(type >> 8), UInt8(type & 0xFF), 0x02, 0x01, 0x01] + element(0x04, value))
        }
        let entry = element(0x31, attribute(1703, element(0x0C, Array(transactionID.utf8))))
        return element(
            0x31,
            (type.map { attribute(0, element(0x0C, Array($0.utf8))) } ?? [])
                + attribute(2, element(0x0C, Array("com.example".utf8)))
                + attribute(12, element(0x16, Array(created.utf8))) + attribute(17, entry))
    }

    @Test("Apple's own sandbox receipts verify against Apple Root CA at their creation date, not against G3")
    func realReceipts() throws {
        let apple = try ReceiptSignatureVerifier(rootCertificates: [AppleRootCertificates.appleRootCA])
        for path in ["receipts/shoshins_ParsingTestZero.b64", "receipts/shoshins_ParsingTestThree.b64"] {
            guard case .verified(let receipt) = apple.verify(base64: try Fixtures.text(path)) else {
                Issue.record("\(path) did not verify")
                continue
            }
            #expect(receipt.creationDate != nil && !receipt.inApp.isEmpty)
            let g3 = try ReceiptSignatureVerifier(rootCertificates: [AppleRootCertificates.appleRootCAG3])
            guard case .invalid = g3.verify(base64: try Fixtures.text(path)) else {
                Issue.record("\(path) verified against G3")
                continue
            }
        }
    }

    @Test("a receipt signed by the receipt-signing leaf verifies and is read")
    func genuine() throws {
        let text = try Self.receipt(
            key: "chain/testLeaf.key", certificates: ["chain/testLeaf.pem", "chain/testIntermediate.pem"])
        guard case .verified(let receipt) = try Self.testChain().verify(base64: text) else {
            Issue.record("the genuine receipt did not verify")
            return
        }
        #expect(receipt.bundleID == "com.example")
        #expect(receipt.inApp.map(\.transactionID) == ["2000000000000001"])
    }

    @Test(
        "re-signed under the same root by a certificate that is not Apple's receipt-signing one: invalid",
        arguments: [
            ("chain/testIntermediate.key", ["chain/testIntermediate.pem"]),
            ("chain/testCA.key", ["chain/testCA.pem"]),
        ])
    func reSigned(key: String, certificates: [String]) throws {
        let text = try Self.receipt(transactionID: "2000000000000999", key: key, certificates: certificates)
        guard case .invalid(let reason) = try Self.testChain().verify(base64: text) else {
            Issue.record("a receipt re-signed with \(key) verified")
            return
        }
        #expect(reason.contains("signer"))
    }

    @Test("a genuine receipt whose content was changed to name another transaction: the signature does not verify")
    func tampered() throws {
        let text = try Self.receipt(
            key: "chain/testLeaf.key", certificates: ["chain/testLeaf.pem", "chain/testIntermediate.pem"])
        var der = [UInt8](try #require(Data(base64Encoded: text)))
        let original = Array("2000000000000001".utf8)
        let at = try #require(der.indices.first { der[$0...].starts(with: original) })
        der.replaceSubrange(at..<(at + original.count), with: Array("2000000000000777".utf8))
        guard case .invalid(let reason) = try Self.testChain().verify(base64: Data(der).base64EncodedString()) else {
            Issue.record("a tampered receipt verified")
            return
        }
        #expect(reason.contains("signature"))
    }

    @Test(
        "truncated, not base64, not PKCS#7, signed without its certificate, or Xcode's: invalid; an iOS 6 plist: legacy"
    )
    func malformed() throws {
        let genuine = try Self.receipt(
            key: "chain/testLeaf.key", certificates: ["chain/testLeaf.pem", "chain/testIntermediate.pem"])
        let der = try #require(Data(base64Encoded: genuine))
        let verifier = try Self.testChain()
        for text in [
            der.prefix(der.count / 2).base64EncodedString(), "%%%", "bm90IGEgcmVjZWlwdA==",
            try Fixtures.text("hostile/receipt_test_chain.b64"),
            try Fixtures.text("xcode/xcode-app-receipt-with-transaction"),
        ] {
            guard case .invalid = verifier.verify(base64: text) else {
                Issue.record("\(text.prefix(40)) was not refused")
                continue
            }
        }
        let legacy = Data(#"{ "purchase-info" = "e30="; }"#.utf8).base64EncodedString()
        guard case .legacy = verifier.verify(base64: legacy) else {
            Issue.record("an iOS 6 receipt was not left to verifyReceipt")
            return
        }
    }

    @Test("creation dates: RFC 3339 in UTC, fractions of any length ignored; anything else is no date")
    func creationDates() {
        #expect(ReceiptSignatureVerifier.seconds("2015-08-12T07:50:46Z") == 1_439_365_846)
        #expect(ReceiptSignatureVerifier.seconds("2015-08-12T07:50:46.123Z") == 1_439_365_846)
        // Ten digits and more once overflowed a 32-bit sum and crashed the worker before the signer was checked.
        #expect(ReceiptSignatureVerifier.seconds("2015-08-12T07:50:46.1234567890Z") == 1_439_365_846)
        #expect(ReceiptSignatureVerifier.seconds("2015-08-12T07:50:46.9999999999999999999Z") == 1_439_365_846)
        for bad in [
            "", "2015-08-12 07:50:46Z", "2015-13-12T07:50:46Z", "2015-08-12T07:50:46", "2015-08-12T07:50:46+01:00",
            "２０15-08-12T07:50:46Z", "2015-08-12T07:50:46.Z", String(repeating: "9", count: 10_000),
            "2015-08-12T07:50:46." + String(repeating: "9", count: 10_000) + "Z", "2015-08-12T07:50:46.12a4Z",
            "9999-99-99T99:99:99Z",
        ] {
            #expect(ReceiptSignatureVerifier.seconds(bad) == nil, "\(bad.prefix(30))")
        }
    }

    @Test(
        "a receipt signed by anyone, whose creation date has a fraction of 10 to 30 digits, is refused, never a crash",
        arguments: [10, 12, 19, 30])
    func forgedReceiptWithLongFraction(digits: Int) throws {
        let created = "2026-11-30T10:00:00." + String(repeating: "7", count: digits) + "Z"
        let signer = try PKCS7Signer(
            keyPEM: try Fixtures.text("chain/testCA.key"), certificatesPEM: try Fixtures.text("chain/testCA.pem"))
        let text = try signer.sign(Self.payload(transactionID: "2000000000000009", created: created))
            .base64EncodedString()
        guard case .invalid(let reason) = try Self.testChain().verify(base64: text) else {
            Issue.record("a receipt signed by the root's key itself verified")
            return
        }
        // Past 40 bytes the date is no date; within, it is read and the signer refused.
        #expect(reason.contains(created.utf8.count > 40 ? "creation date" : "signer"))
    }

    @Test("the receipt type Apple signs in names its environment; Apple's sandbox receipts say ProductionSandbox")
    func receiptEnvironment() throws {
        for (type, environment) in [
            ("Production", AppleEnvironment.production), ("ProductionSandbox", .sandbox), ("Xcode", .xcode),
        ] {
            let receipt = AppReceipt(payload: Self.payload(transactionID: "1", type: type))
            #expect(receipt.receiptType == type)
            #expect(receipt.environment == environment)
        }
        #expect(AppReceipt(payload: Self.payload(transactionID: "1")).environment == nil)
        #expect(AppReceipt(payload: Self.payload(transactionID: "1", type: "Somewhere")).environment == nil)
        let real = try #require(AppReceipt(base64: try Fixtures.text("receipts/shoshins_ParsingTestZero.b64")))
        #expect(real.environment == .sandbox)
    }
}
