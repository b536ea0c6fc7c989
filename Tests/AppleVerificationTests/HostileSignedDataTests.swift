@testable import AppleVerification
import Crypto
import Foundation
import Testing

/// Signed transactions a client made up or Apple's test key signed, holding what Apple never sends. Each is
/// a verdict, never a crash: a trap here is a crash loop on every replica that takes the job's partition.
@Suite("Signed data with hostile numbers and fields")
struct HostileSignedDataTests {
    func verdict(_ payload: String, realRoot: Bool = false) throws -> AppleVerdict {
        try AppleVerifier.verdict(
            onSigned: try TestChain.sign(payload), source: .signedTransaction,
            verifier: try TestChain.verifier(realRoot: realRoot))
    }

    @Test(
        "a signedDate no certificate can be checked at is refused, before the chain, with Apple's chain or a self-made one",
        arguments: [
            "1e30", "-1e30", "1e300", "-1", "253402300800000", "9223372036854775807", "1.7976931348623157e308",
        ], [false, true])
    func absurdSignedDate(signedDate: String, realRoot: Bool) throws {
        let jws = try TestChain.sign(TestChain.transaction(["signedDate": signedDate]))
        let error = #expect(throws: AppleVerificationError.self) {
            try TestChain.verifier(realRoot: realRoot).verifyTransaction(jws)
        }
        #expect(error?.code == .malformed)
        #expect(
            try verdict(TestChain.transaction(["signedDate": signedDate]), realRoot: realRoot).reason
                == "invalid_receipt")
    }

    @Test(
        "numbers that pass the signature but make no date or count are an invalid receipt, not a grant",
        arguments: [
            ("purchaseDate", "1e30"), ("purchaseDate", "-0.5"), ("expiresDate", "-1e30"), ("expiresDate", "1e300"),
            ("revocationDate", "1e30"), ("revocationDate", "-9999999999999999999"),
            ("originalPurchaseDate", "253402300800000"), ("quantity", "1e30"), ("quantity", "9223372036854775808"),
            ("quantity", "1.5"), ("price", "1e30"), ("revocationReason", "-1e30"), ("offerType", "1e19"),
        ])
    func absurdNumbersAfterTheSignature(field: String, value: String) throws {
        let verdict = try verdict(TestChain.transaction([field: value]))
        #expect(verdict.reason == "invalid_receipt")
    }

    @Test("renewal info and notifications with an absurd time are refused too")
    func absurdTimesInOtherPayloads() throws {
        let verifier = try TestChain.verifier()
        let renewal = try TestChain.sign(
            #"{"environment":"Production","signedDate":1697679936000,"gracePeriodExpiresDate":1e30}"#)
        #expect(throws: AppleVerificationError.self) { try verifier.verifyRenewalInfo(renewal) }
        let notification = try TestChain.sign(
            #"{"notificationType":"TEST","signedDate":-1e30,"data":{"bundleId":"com.example","environment":"Production"}}"#
        )
        let error = #expect(throws: AppleVerificationError.self) { try verifier.verifyNotification(notification) }
        #expect(error?.code == .malformed)
    }

    @Test("fractional milliseconds (Xcode's StoreKit testing) verify, and keep their fraction")
    func fractionalMilliseconds() throws {
        let verdict = try verdict(
            TestChain.transaction([
                "signedDate": "1697679936056.7297", "purchaseDate": "1697679936049.7297",
                "expiresDate": "1700271936049.5", "type": #""Auto-Renewable Subscription""#,
            ]))
        let transaction = try #require(verdict.purchase?.transactions.first)
        let purchased = try #require(transaction.purchaseDate).timeIntervalSince1970
        #expect(abs(purchased - 1_697_679_936.049_729_7) < 0.000_001)
        #expect(transaction.expiresDate.map { abs($0.timeIntervalSince1970 - 1_700_271_936.049_5) < 0.000_001 } == true)
    }

    @Test(
        "Xcode's signed data, with fractional dates, is refused in production and its dates still convert",
        arguments: ["xcode/xcode-signed-transaction", "xcode/xcode-signed-renewal-info"])
    func xcodeData(path: String) throws {
        let jws = try Fixtures.text(path)
        #expect(
            try AppleVerifier.verdict(onSigned: jws, source: .signedTransaction, verifier: try TestChain.verifier())
                .reason == "invalid_receipt")
        let payload = try #require(Base64URL.decode(jws.split(separator: ".")[1]))
        let transaction = try JSONDecoder().decode(JWSTransaction.self, from: payload)
        let converted = try AppleTransaction(transaction)
        if let milliseconds = transaction.purchaseDate {
            let seconds = try #require(converted.purchaseDate).timeIntervalSince1970
            #expect(abs(seconds - milliseconds / 1000) < 0.000_001)
        }
    }

    @Test(
        "a signed transaction without bundleId, or with a null one, is refused as another app's",
        arguments: [nil, "null"] as [String?])
    func missingBundleID(bundleID: String?) throws {
        #expect(try verdict(TestChain.transaction(["bundleId": bundleID])).reason == "bundle_mismatch")
        let error = #expect(throws: AppleVerificationError.self) {
            try TestChain.verifier().verifyTransaction(TestChain.sign(TestChain.transaction(["bundleId": bundleID])))
        }
        #expect(error?.code == .bundleMismatch)
    }

    @Test("a notification without bundleId is refused as another app's")
    func notificationWithoutBundleID() throws {
        let jws = try TestChain.sign(
            #"{"notificationType":"TEST","signedDate":1697679936000,"data":{"environment":"Production"}}"#)
        let error = #expect(throws: AppleVerificationError.self) { try TestChain.verifier().verifyNotification(jws) }
        #expect(error?.code == .bundleMismatch)
    }

    /// JSONDecoder keeps one of two equal keys (the first, in this Foundation) and JSONSerialization the
    /// other: the payload is decoded once, so the bundle and date that were checked are those returned.
    @Test("a key given twice is read once: what was checked is what is returned")
    func duplicateKeys() throws {
        for payload in [
            #"{"bundleId":"com.other","bundleId":"com.example","environment":"Production","transactionId":"7","signedDate":1697679936000}"#,
            #"{"bundleId":"com.example","bundleId":"com.other","environment":"Production","transactionId":"7","signedDate":1697679936000}"#,
            #"{"bundleId":"com.example","environment":"Production","transactionId":"7","signedDate":1697679936000,"signedDate":1e30}"#,
            #"{"bundleId":"com.example","environment":"Production","transactionId":"7","signedDate":1e30,"signedDate":1697679936000}"#,
        ] {
            switch try verdict(payload) {
            case .verified(let purchase):
                #expect(purchase.bundleID == "com.example")
                let signed = try TestChain.verifier().verifyTransaction(TestChain.sign(payload)).signedDate
                #expect(signed == 1_697_679_936_000)
            case .rejected(let rejection, _):
                #expect(rejection == .bundleMismatch || rejection == .invalidReceipt)
            }
        }
    }
}
