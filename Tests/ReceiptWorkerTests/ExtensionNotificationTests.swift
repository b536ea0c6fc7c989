import Foundation
import Ledger
import Messaging
import Testing
import Vocabulary

/// A mass extension's end (RENEWAL_EXTENSION/SUMMARY, a `summary` and no `data`) through the notification flow,
/// in memory: one `receipt.extension_completed`, keyed by Apple's request, and the hostile shapes beside it.
@Suite("A mass extension's summary: the notification flow, in memory")
struct ExtensionNotificationTests {
    let notifications: NotificationHandlerTests

    init() throws { notifications = try NotificationHandlerTests() }

    /// A RENEWAL_EXTENSION/SUMMARY as Apple signs it (Apple's own fixture's fields), `summary` changed by `edit`.
    func summary(uuid: String = UUID().uuidString, _ edit: (inout [String: Any]) -> Void = { _ in }) throws
        -> [UInt8]
    {
        var summary: [String: Any] = [
            "environment": "Production", "appAppleId": 1234, "bundleId": "com.example",
            "productId": "com.example.product", "requestIdentifier": "efb27071-45a4-4aca-9854-2a1e9146f265",
            "storefrontCountryCodes": ["CAN", "USA", "MEX"], "succeededCount": 5, "failedCount": 2,
        ]
        edit(&summary)
        let payload: [String: Any] = [
            "notificationType": "RENEWAL_EXTENSION", "subtype": "SUMMARY", "notificationUUID": uuid,
            "version": "2.0", "signedDate": Handlers.milliseconds(Date()), "summary": summary,
        ]
        return Array(try JSONSerialization.data(withJSONObject: ["signedPayload": try Handlers.sign(payload)]))
    }

    @Test(
        "a mass extension's summary becomes one receipt.extension_completed keyed by its request, with Apple's counts; delivered again, the same event"
    )
    func completed() async throws {
        let uuid = UUID().uuidString
        let outcome = try await notifications.notify(try summary(uuid: uuid))
        let event = try #require(outcome.event)
        #expect(event["type"] as? String == "receipt.extension_completed")
        #expect(event["request_identifier"] as? String == "efb27071-45a4-4aca-9854-2a1e9146f265")
        #expect(event["product_id"] as? String == "com.example.product")
        #expect(event["storefront_country_codes"] as? [String] == ["CAN", "USA", "MEX"])
        #expect(event["succeeded_count"] as? Int == 5 && event["failed_count"] as? Int == 2)
        #expect(event["bundle_id"] as? String == "com.example" && event["environment"] as? String == "Production")
        if case .publish(let records) = outcome {
            #expect(records.first?.key == "efb27071-45a4-4aca-9854-2a1e9146f265")
        }
        #expect(
            try await notifications.notify(try summary(uuid: uuid)).event?["event_id"] as? String
                == event["event_id"] as? String)
        // For every storefront: Apple leaves the list out, the event says null.
        let all = try await notifications.notify(try summary { $0["storefrontCountryCodes"] = nil })
        #expect(all.event?["storefront_country_codes"] is NSNull)
    }

    @Test(
        "a summary of another app or a list that is not one is dead-lettered; one without its request identifier publishes nothing"
    )
    func hostile() async throws {
        for body in [
            try summary { $0["bundleId"] = "com.stranger" }, try summary { $0["storefrontCountryCodes"] = "USA" },
            try summary { $0["storefrontCountryCodes"] = [1, 2] }, try summary { $0["succeededCount"] = 1e300 },
        ] {
            let refused = try await notifications.notify(body)
            #expect(refused.events.isEmpty)
            #expect(refused.deadLetter?.reason == .malformedJob)
        }
        let anonymous = try await notifications.notify(try summary { $0["requestIdentifier"] = nil })
        #expect(anonymous.events.isEmpty && anonymous.deadLetter == nil)
    }
}
