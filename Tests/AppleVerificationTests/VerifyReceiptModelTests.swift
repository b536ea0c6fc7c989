import Foundation
import Testing

@testable import AppleVerification
import Vocabulary

@Suite("verifyReceipt statuses and bodies")
struct VerifyReceiptModelTests {
    @Test(
        "every documented status is classified",
        arguments: [
            (0, nil, VerifyReceiptStatus.valid),
            (21000, nil, .invalid(21000)), (21001, nil, .invalid(21001)), (21002, nil, .malformedOrTemporary),
            (21003, nil, .invalid(21003)), (21004, nil, .sharedSecretMismatch), (21005, nil, .retryable(21005)),
            (21006, nil, .invalid(21006)), (21007, nil, .sandboxReceipt), (21008, nil, .productionReceipt),
            (21009, nil, .retryable(21009)), (21010, nil, .invalid(21010)),
            (21100, true, .retryable(21100)), (21150, true, .retryable(21150)), (21199, true, .retryable(21199)),
            (21100, false, .invalid(21100)), (21199, nil, .retryable(21199)), (99999, nil, .invalid(99999)),
        ] as [(Int, Bool?, VerifyReceiptStatus)])
    func statusTable(status: Int, isRetryable: Bool?, expected: VerifyReceiptStatus) {
        #expect(VerifyReceiptStatus(status: status, isRetryable: isRetryable) == expected)
    }

    @Test(
        "is_retryable and is-retryable are both read, as booleans, numbers or strings",
        arguments: [
            #"{"status":21101,"is_retryable":true}"#, #"{"status":21101,"is-retryable":true}"#,
            #"{"status":21101,"is-retryable":1}"#, #"{"status":21101,"is_retryable":"true"}"#,
        ])
    func retryableSpellings(body: String) throws {
        let response = try VerifyReceiptResponse(json: Array(body.utf8))
        #expect(VerifyReceiptStatus(status: response.status, isRetryable: response.isRetryable) == .retryable(21101))
    }

    @Test("is_upgraded marks the entry the player upgraded from, as Apple's string, a boolean or a number")
    func upgradedEntries() throws {
        let body = """
            {"status":0,"latest_receipt_info":[
            {"transaction_id":"1","product_id":"vip","is_upgraded":"true"},
            {"transaction_id":"2","product_id":"vip","is_upgraded":true},
            {"transaction_id":"3","product_id":"vip","is_upgraded":1},
            {"transaction_id":"4","product_id":"vip_gold"},
            {"transaction_id":"5","product_id":"vip","is_upgraded":"false"},
            {"transaction_id":"6","product_id":"vip","is_upgraded":false},
            {"transaction_id":"7","product_id":"vip","is_upgraded":"TRUE"}]}
            """
        let entries = try #require(try VerifyReceiptResponse(json: Array(body.utf8)).latestReceiptInfo)
        let upgraded = try entries.compactMap { try AppleTransaction($0) }.map {
            "\($0.transactionID):\($0.isUpgraded)"
        }
        #expect(upgraded == ["1:true", "2:true", "3:true", "4:false", "5:false", "6:false", "7:true"])
        // Neither true nor false: the entry is unreadable, never taken as no upgrade.
        let unreadable = try VerifyReceiptResponse(
            json: Array(#"{"status":0,"latest_receipt_info":[{"transaction_id":"8","is_upgraded":"maybe"}]}"#.utf8))
        #expect(throws: AppleVerificationError.self) { try AppleTransaction(unreadable.latestReceiptInfo![0]) }
    }

    @Test("ids written as numbers past Int64 keep their digits: two such transactions stay two")
    func idsPastInt64() throws {
        let body = """
            {"status":0,"latest_receipt_info":[
            {"transaction_id":100000000000000000001,"product_id":"coins","quantity":1},
            {"transaction_id":100000000000000000002,"product_id":"coins","quantity":1}]}
            """
        let entries = try #require(try VerifyReceiptResponse(json: Array(body.utf8)).latestReceiptInfo)
        #expect(entries.map(\.transactionId) == ["100000000000000000001", "100000000000000000002"])
    }

    @Test("Apple's recorded iOS 6 response decodes to one flat transaction with string dates")
    func ios6Response() throws {
        let data = try Fixtures.data("receipts/ios6_transaction_receipt_sandbox_2016.verifyReceipt_response.json")
        let response = try VerifyReceiptResponse(json: Array(data))
        #expect(response.status == 0)
        #expect(response.receipt?.bid == "com.sy599.qp.paodekuai")
        #expect(response.receipt?.uniqueIdentifier == "d5d23b6e41732226d03cdad96184ab7108fcf91f")
        let entry = try #require(response.receipt?.ios6Transaction)
        #expect(entry.transactionId == "1000000230566953")
        #expect(entry.productId == "com.sy599.qp.paodekuai.m30")
        let transaction = try #require(try AppleTransaction(entry))
        #expect(transaction.purchaseDate == Date(timeIntervalSince1970: 1_471_579_178.667))
    }

    @Test("the transaction id of an iOS 6 transaction receipt is read locally: 33993399")
    func legacyTransactionID() throws {
        #expect(
            LegacyTransactionReceipt.transactionID(fromBase64: try Fixtures.text("mock_signed_data/legacyTransaction"))
                == "33993399")
        #expect(LegacyTransactionReceipt.transactionID(fromBase64: "bm90IGEgcGxpc3Q=") == nil)
    }

    @Test("Retry-After as UNIX milliseconds (Apple's documentation), UNIX seconds, or a delay in seconds")
    func retryAfter() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let maximum = Duration.seconds(60)
        #expect(AppleHTTP.retryAfter("1700000002500", now: now, maximum: maximum) == .milliseconds(2500))
        #expect(AppleHTTP.retryAfter("1700000003", now: now, maximum: maximum) == .seconds(3))
        #expect(AppleHTTP.retryAfter("7", now: now, maximum: maximum) == .seconds(7))
        #expect(AppleHTTP.retryAfter("1699999999000", now: now, maximum: maximum) == .zero)
        #expect(AppleHTTP.retryAfter("soon", now: now, maximum: maximum) == nil)
    }
}

@Suite("App Store Server API bodies from Apple's tests")
struct ServerAPIModelTests {
    @Test(
        "error bodies keep their code, an unknown one raw",
        arguments: [
            ("models/apiException.json", 5000000), ("models/apiTooManyRequestsException.json", 4290000),
            ("models/apiUnknownError.json", 9990000), ("models/transactionIdNotFoundError.json", 4040010),
            ("models/invalidTransactionIdError.json", 4000006),
        ])
    func errorBodies(path: String, code: Int) throws {
        #expect(try JSONDecoder().decode(APIErrorBody.self, from: Fixtures.data(path)).errorCode == code)
    }

    @Test("the retryable set is Apple's: 4040002, 4040004, 4040006, 5000001")
    func retryableSet() {
        #expect(AppStoreServerAPIClient.retryableErrorCodes == [4040002, 4040004, 4040006, 5000001])
    }

    @Test("a decoded transaction with every field, an environment Apple may add, and a revocation")
    func signedTransactionModel() throws {
        let transaction = try JSONDecoder().decode(
            JWSTransaction.self, from: Fixtures.data("models/signedTransaction.json"))
        #expect(transaction.environment?.rawValue == "LocalTesting")
        #expect(transaction.productType == .autoRenewableSubscription)
        #expect(transaction.price == 10990)
        #expect(transaction.revocationDate == 1_698_148_950_000)
        #expect(transaction.appAccountToken == "7e3fb20b-4cdb-47cc-936d-99d65f608138")
        let normalised = try AppleTransaction(transaction)
        #expect(normalised.revocationDate == Date(timeIntervalSince1970: 1_698_148_950))
        #expect(normalised.isSubscription)
    }

    @Test("an unknown product type and environment decode, raw value kept")
    func openValues() throws {
        let json =
            #"{"transactionId":"1","type":"Hologram Subscription","environment":"Metaverse","purchaseDate":1697679936049.7297}"#
        let transaction = try JSONDecoder().decode(JWSTransaction.self, from: Data(json.utf8))
        #expect(transaction.productType == .other("Hologram Subscription"))
        #expect(transaction.environment?.rawValue == "Metaverse")
        #expect(transaction.purchaseDate == 1_697_679_936_049.7297)
    }

    @Test("the newest entry for the order's product is selected when no transaction id is given")
    func selection() {
        let purchase = VerifiedPurchase(
            source: .receipt, bundleID: "b", environment: .production,
            transactions: [
                AppleTransaction(transactionID: "1", productID: "p", purchaseDate: Date(timeIntervalSince1970: 10)),
                AppleTransaction(transactionID: "2", productID: "p", purchaseDate: Date(timeIntervalSince1970: 30)),
                AppleTransaction(transactionID: "3", productID: "q", purchaseDate: Date(timeIntervalSince1970: 50)),
            ])
        #expect(purchase.select(transactionID: nil, productID: "p")?.transactionID == "2")
        #expect(purchase.select(transactionID: "1", productID: "p")?.transactionID == "1")
        #expect(purchase.select(transactionID: "9", productID: "p") == nil)
        #expect(purchase.select(transactionID: nil, productID: "z") == nil)
    }
}

@Suite("verifyReceipt request body")
struct VerifyReceiptRequestBodyTests {
    @Test("the body is Apple's JSON, with the receipt, exclude-old-transactions and an escaped password")
    func body() throws {
        let data = VerifyReceiptClient.requestBody(receipt: "TUlJ+/=", sharedSecret: #"se"cr\et"#)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["receipt-data"] as? String == "TUlJ+/=")
        #expect(object["exclude-old-transactions"] as? Bool == false)
        #expect(object["password"] as? String == #"se"cr\et"#)
        let withoutSecret = try #require(
            try JSONSerialization.jsonObject(with: VerifyReceiptClient.requestBody(receipt: "x", sharedSecret: nil))
                as? [String: Any])
        #expect(withoutSecret["password"] == nil)
    }

    @Test("the body's bytes are the same for every receipt and secret, escapes included")
    func bytes() {
        let body = VerifyReceiptClient.requestBody(receipt: "TUlJ+/=", sharedSecret: "se\"cr\\et\u{1}")
        #expect(
            String(decoding: body, as: UTF8.self)
                == #"{"receipt-data":"TUlJ+/=","exclude-old-transactions":false,"password":"se\"cr\\et\u0001"}"#)
        let escaped = VerifyReceiptClient.requestBody(receipt: "QU\nJD", sharedSecret: nil)
        #expect(
            String(decoding: escaped, as: UTF8.self)
                == #"{"receipt-data":"QU\nJD","exclude-old-transactions":false}"#)
    }
}
