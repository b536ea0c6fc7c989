import Foundation
import Testing

@testable import AppleVerification
import Vocabulary

/// Apple's notification models (fixtures/apple/models) signed with Apple's test chain, as Apple's own
/// library tests do: they decode, verify, keep what the worker reads, and are refused where Apple refuses.
@Suite("App Store Server Notifications V2 from Apple's fixtures")
struct NotificationFixtureTests {
    /// Apple's model with its placeholder `signedTransactionInfo` replaced by a real signed transaction, the
    /// environment and app id as given.
    private func signed(_ model: String, environment: String = "LocalTesting", appAppleID: String? = "41234") throws
        -> String
    {
        var object = try #require(
            try JSONSerialization.jsonObject(with: Fixtures.data("models/\(model)")) as? [String: Any])
        var data = try #require(object["data"] as? [String: Any])
        data["signedTransactionInfo"] = try TestChain.sign(
            TestChain.transaction(["environment": "\"\(environment)\""]))
        data["signedRenewalInfo"] = nil
        data["environment"] = environment
        data["appAppleId"] = appAppleID.flatMap(Int.init)
        object["data"] = data
        return try TestChain.sign(String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self))
    }

    private func verifier(appAppleID: Int64? = 41234) throws -> SignedDataVerifier {
        var configuration = SignedDataVerifier.Configuration(
            rootCertificates: [try Fixtures.data("certs/testCA.der")], bundleID: "com.example")
        configuration.allowedEnvironments = [.production, .sandbox, .localTesting]
        configuration.appAppleID = appAppleID
        return try SignedDataVerifier(configuration: configuration)
    }

    @Test("signedNotification.json: SUBSCRIBED / INITIAL_BUY decodes and verifies, nested transaction too")
    func subscribed() throws {
        let jws = try signed("signedNotification.json")
        let notification = try verifier().verifyNotification(jws)
        #expect(notification.notificationType == "SUBSCRIBED" && notification.subtype == "INITIAL_BUY")
        #expect(notification.notificationUUID == "002e14d5-51f5-4503-b5a8-c3a1af68eb20")
        #expect(notification.version == "2.0" && notification.signedDate == 1_698_148_900_000)
        #expect(notification.data?.bundleId == "com.example" && notification.data?.appAppleId == 41234)
        #expect(notification.data?.status == 1)
        let nested = try #require(notification.data?.signedTransactionInfo)
        #expect(try verifier().verifyTransaction(nested).transactionId == "2000000000000001")
    }

    @Test("signedConsumptionRequestNotification.json: CONSUMPTION_REQUEST keeps consumptionRequestReason")
    func consumptionRequest() throws {
        let notification = try verifier().verifyNotification(try signed("signedConsumptionRequestNotification.json"))
        #expect(notification.notificationType == "CONSUMPTION_REQUEST")
        #expect(notification.data?.consumptionRequestReason == "UNINTENDED_PURCHASE")
    }

    @Test("in Production the notification must name this app: another app id, none, or none configured is refused")
    func productionAppAppleID() throws {
        let production = try signed("signedNotification.json", environment: "Production")
        #expect(try verifier().verifyNotification(production).data?.appAppleId == 41234)
        for (jws, expected) in [
            (production, Int64(41235)),
            (try signed("signedNotification.json", environment: "Production", appAppleID: nil), 41234),
        ] {
            let error = #expect(throws: AppleVerificationError.self) {
                try verifier(appAppleID: expected).verifyNotification(jws)
            }
            #expect(error?.code == .bundleMismatch)
        }
        let error = #expect(throws: AppleVerificationError.self) {
            try verifier(appAppleID: nil).verifyNotification(production)
        }
        #expect(error?.code == .bundleMismatch)
        // Sandbox: Apple leaves appAppleId out, and that is fine.
        let sandbox = try signed("signedNotification.json", environment: "Sandbox", appAppleID: nil)
        #expect(try verifier().verifyNotification(sandbox).notificationType == "SUBSCRIBED")
    }

    @Test("a notification type and fields Apple adds later decode, and are kept")
    func unknownTypesDecode() throws {
        let payload = """
            {"notificationType":"SOMETHING_NEW","subtype":"NEWER","notificationUUID":"u-1","version":"2.1",
             "signedDate":\(TestChain.signedDate),"appData":{"x":1},"newTopLevel":[1,2,3],
             "data":{"bundleId":"com.example","environment":"Sandbox","newField":{"deep":true}}}
            """
        let notification = try verifier().verifyNotification(try TestChain.sign(payload))
        #expect(notification.notificationType == "SOMETHING_NEW" && notification.subtype == "NEWER")
    }
}
