@testable import AppleVerification
import Crypto
import Foundation
import Testing
import Vocabulary

/// The signed payloads are read by a scanner, not JSONDecoder (SignedPayloadDecoding.swift): they must come
/// out as the models' Decodable conformances read them, and refuse what is not JSON or not the right type.
@Suite("Signed payloads read without JSONDecoder")
struct SignedPayloadDecodingTests {
    func scanned<Payload: SignedPayload>(_ json: String, as type: Payload.Type) throws(AppleVerificationError)
        -> Payload
    {
        try Payload(payloadJSON: Array(json.utf8))
    }

    @Test(
        "Apple's payload models read the same as with JSONDecoder",
        arguments: ["signedTransaction", "signedTransactionWithRevocation"])
    func transactions(name: String) throws {
        let data = try Fixtures.data("models/\(name).json")
        let expected = try JSONDecoder().decode(JWSTransaction.self, from: data)
        #expect(try JWSTransaction(payloadJSON: Array(data)) == expected)
        #expect(expected.transactionId != nil && expected.price != nil)
    }

    @Test("renewal info and notifications read the same as with JSONDecoder")
    func renewalInfoAndNotifications() throws {
        let renewal = try Fixtures.data("models/signedRenewalInfo.json")
        #expect(
            try JWSRenewalInfo(payloadJSON: Array(renewal)) == JSONDecoder().decode(JWSRenewalInfo.self, from: renewal))
        for name in ["signedNotification", "signedConsumptionRequestNotification"] {
            let data = try Fixtures.data("models/\(name).json")
            let expected = try JSONDecoder().decode(NotificationPayload.self, from: data)
            #expect(try NotificationPayload(payloadJSON: Array(data)) == expected)
            #expect(expected.data?.bundleId == "com.example")
        }
    }

    @Test(
        "an app transaction (RESCIND_CONSENT's appData) reads as with JSONDecoder; a field of the wrong type is refused"
    )
    func appTransaction() throws {
        let json = #"""
            {"receiptType":"Production","appAppleId":1234,"bundleId":"com.example","applicationVersion":"1.2",
             "versionExternalIdentifier":1,"receiptCreationDate":1698148900000,"originalPurchaseDate":1698148800000,
             "originalApplicationVersion":"1.0","deviceVerification":"x","deviceVerificationNonce":"y",
             "appTransactionId":"704289572311","originalPlatform":"iOS","signedDate":1698148900000}
            """#
        let app = try scanned(json, as: JWSAppTransaction.self)
        #expect(app == (try JSONDecoder().decode(JWSAppTransaction.self, from: Data(json.utf8))))
        #expect(app.appTransactionId == "704289572311" && app.receiptType == "Production")
        for (hostile, field) in [
            (#"{"appTransactionId":704289572311}"#, "appTransactionId"), (#"{"appAppleId":"1"}"#, "appAppleId"),
            (#"{"signedDate":"soon"}"#, "signedDate"),
        ] {
            let error = #expect(throws: AppleVerificationError.self) {
                try scanned(hostile, as: JWSAppTransaction.self)
            }
            #expect(error?.reason.contains(field) == true)
        }
    }

    @Test("null is absent; unknown keys, nested or not, are ignored; escapes are read")
    func nullsUnknownsAndEscapes() throws {
        let transaction = try scanned(
            #"""
            {"transactionId":"1","quantity":null,"newField":{"deep":[1,2.5e3,true,null,"x"]},
             "productId":"com.example.\u0063oins","storefront":"\u00c9\"\\/"}
            """#, as: JWSTransaction.self)
        #expect(transaction.transactionId == "1")
        #expect(transaction.quantity == nil)
        #expect(transaction.productId == "com.example.coins")
        #expect(transaction.storefront == "É\"\\/")
        let notification = try scanned(
            #"{"notificationType":"TEST","data":null,"summary":{}}"#, as: NotificationPayload.self)
        #expect(notification.data == nil)
        #expect(notification.summary == NotificationPayload.AppData())
    }

    @Test(
        "a value of the wrong type is refused, naming the field",
        arguments: [
            (#"{"quantity":"1"}"#, "quantity"), (#"{"quantity":1.0}"#, "quantity"), (#"{"quantity":1e2}"#, "quantity"),
            (#"{"bundleId":5}"#, "bundleId"), (#"{"isUpgraded":1}"#, "isUpgraded"),
            (#"{"purchaseDate":"1698148900000"}"#, "purchaseDate"), (#"{"environment":true}"#, "environment"),
            (#"{"price":9223372036854775808}"#, "price"),
            (
                #"{"revocationPercentage":-9223372036854775809}"#,
                "revocationPercentage"
            ),
        ])
    func wrongTypes(json: String, field: String) throws {
        let error = #expect(throws: AppleVerificationError.self) { try scanned(json, as: JWSTransaction.self) }
        #expect(error?.code == .malformed)
        #expect(error?.reason.contains(field) == true)
    }

    @Test("a key given twice is refused, at the top and inside data; a nested object with escapes is read")
    func duplicatesAndNestedEscapes() throws {
        for json in [#"{"bundleId":"a","bundleId":"b"}"#, #"{"bundleId":"a","bundl\u0065Id":"b"}"#] {
            let error = #expect(throws: AppleVerificationError.self) { try scanned(json, as: JWSTransaction.self) }
            #expect(error?.reason.contains("appears twice") == true)
        }
        #expect(throws: AppleVerificationError.self) {
            try scanned(#"{"data":{"bundleId":"a","bundleId":"b"}}"#, as: NotificationPayload.self)
        }
        let notification = try scanned(
            #"{"notificationType":"REFUND","data":{"bundleId":"com.\u0065xample","environment":"Sandbox"}}"#,
            as: NotificationPayload.self)
        #expect(notification.data?.bundleId == "com.example")
        #expect(notification.data?.environment == .sandbox)
    }

    @Test("integers at the edges of their type are read")
    func integerEdges() throws {
        let transaction = try scanned(
            #"{"price":9223372036854775807,"revocationReason":-9223372036854775808,"quantity":0}"#,
            as: JWSTransaction.self)
        #expect(transaction.price == Int64.max)
        #expect(transaction.revocationReason?.rawValue == Int.min)
        #expect(transaction.quantity == 0)
        let error = #expect(throws: AppleVerificationError.self) {
            try scanned(#"{"data":{"appAppleId":[1]}}"#, as: NotificationPayload.self)
        }
        #expect(error?.reason.contains("appAppleId") == true)
    }

    @Test(
        "what is not one JSON object is refused (and nesting past 64)",
        arguments: [
            "", "[]", #"{"a":1} x"#, #"{"a":tru}"#, #"{"a":nul}"#, #"{"a":01}"#, #"{"a":1.}"#, #"{"a":-}"#,
            #"{"a":.5}"#, #"{"a":1e}"#, #"{"a":"\x"}"#, #"{"a":"\u12"}"#, "{\"a\":\"\u{01}\"}", #"{"a":1,}"#,
            #"{"a" 1}"#, #"{"a":[1,]}"#, #"{"a":{"b":1}"#,
            String(repeating: #"{"a":"#, count: 65) + "1" + String(repeating: "}", count: 65),
        ])
    func notJSON(json: String) throws {
        let error = #expect(throws: AppleVerificationError.self) { try scanned(json, as: JWSTransaction.self) }
        #expect(error?.code == .malformed)
    }

    @Test("base64url decoding matches Foundation's base64 for every length and refuses what is not base64url")
    func base64url() throws {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<80 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64URL.encode(bytes)
            #expect(Base64URL.decodeBytes(encoded[...]) == bytes)
            #expect(Base64URL.decode(encoded[...]) == Data(bytes))
        }
        for text in ["a", "abcde", "ab+c", "ab/c", "ab=c", "abc=", "ab c", "ab\u{E9}"] {
            #expect(Base64URL.decodeBytes(text[...]) == nil, "\(text)")
        }
    }
}
