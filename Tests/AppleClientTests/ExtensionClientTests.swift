import AppleVerification
import Foundation
import TestSupport
import Testing
import Vocabulary

/// Renewal-date extensions against the simulator over HTTP: Apple's answers, errors and limits, and the values
/// the client refuses before any call.
@Suite("Renewal-date extensions: the client and the simulator")
struct ExtensionClientTests {
    typealias Ask = AppStoreServerAPIClient.RenewalExtension

    func ask(_ days: Int = 1, id: String = UUID().uuidString.lowercased()) -> Ask {
        Ask(days: days, reason: .serviceIssueOrOutage, requestIdentifier: id)
    }

    @Test(
        "Apple's refusals: a family member's subscription, an expired one, none, and a non-subscription; each its own code"
    )
    func refusals() async throws {
        let harness = try SimulatorHarness()
        let client = try harness.apiClient()
        let family = try await harness.purchase([
            "product_id": "vip", "type": "subscription", "family_shared": true,
        ])
        let expired = try await harness.purchase([
            "product_id": "vip", "type": "subscription", "expires_in_seconds": -60,
        ])
        let coins = try await harness.purchase(["product_id": "coins", "type": "consumable"])
        var attempts = 0
        for (id, code) in [
            (family.transactionID, 4030007), (expired.transactionID, 4030004), ("1999999999999999", 4040005),
            (coins.transactionID, 4040005),
        ] {
            let answer = try await client.extendRenewalDate(
                originalTransactionID: id, ask(), environment: .production, attempts: &attempts)
            #expect(answer == .refused(status: code == 4040005 ? 404 : 403, errorCode: code), "\(id)")
        }
        #expect(attempts == 4)
    }

    @Test(
        "values out of Apple's bounds are refused without a call: 0 or 91 days, an identifier of 129 bytes or none, a path in an id, an empty storefront list, a product id with a slash"
    )
    func hostileValues() async throws {
        let harness = try SimulatorHarness()
        let client = try harness.apiClient()
        var attempts = 0
        for (asked, id) in [
            (ask(0), "2000000000000001"), (ask(91), "2000000000000001"),
            (ask(id: String(repeating: "a", count: 129)), "2000000000000001"), (ask(id: ""), "2000000000000001"),
            (ask(id: "a\u{7}b"), "2000000000000001"), (ask(), "1/../../admin"),
            (ask(), "99999999999999999999999999999999999999999999999999999999999999999"),
        ] {
            let answer = try await client.extendRenewalDate(
                originalTransactionID: id, asked, environment: .production, attempts: &attempts)
            guard case .refused(400, _) = answer else {
                Issue.record("\(asked) \(id): \(answer)")
                continue
            }
        }
        for (product, storefronts, asked) in [
            ("vip/../x", nil, ask()), ("vip", [], ask()), ("vip", ["usa"], ask()), ("vip", nil, ask(id: "not-a-uuid")),
            (String(repeating: "p", count: 101), nil, ask()),
        ] as [(String, [String]?, Ask)] {
            let answer = try await client.extendAllRenewalDates(
                productID: product, storefronts: storefronts, asked, environment: .production, attempts: &attempts)
            guard case .refused(400, _) = answer else {
                Issue.record("\(product) \(String(describing: storefronts)): \(answer)")
                continue
            }
        }
        let status = try await client.massExtensionStatus(
            productID: "vip", requestIdentifier: "../x", environment: .production, attempts: &attempts)
        #expect(status == .refused(status: 400, errorCode: 4000011))
        #expect(attempts == 0, "nothing was sent")
    }

    @Test("a mass request asked again with its identifier is the same request; a status of none is not found")
    func massIdempotent() async throws {
        let harness = try SimulatorHarness()
        let client = try harness.apiClient()
        _ = try await harness.purchase(["product_id": "vip", "type": "subscription"])
        let id = UUID().uuidString.lowercased()
        var attempts = 0
        for _ in 0..<2 {
            let answer = try await client.extendAllRenewalDates(
                productID: "vip", storefronts: nil, ask(id: id), environment: .production, attempts: &attempts)
            #expect(answer == .accepted(requestIdentifier: id))
        }
        var done: AppStoreServerAPIClient.MassExtensionStatus?
        for _ in 0..<100 where done == nil {
            let answer = try await client.massExtensionStatus(
                productID: "vip", requestIdentifier: id, environment: .production, attempts: &attempts)
            if case .status(let status) = answer, status.complete { done = status }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(done?.succeeded == 1 && done?.failed == 0, "one subscriber, extended once, not twice")
        let unknown = try await client.massExtensionStatus(
            productID: "vip", requestIdentifier: UUID().uuidString, environment: .production, attempts: &attempts)
        #expect(unknown == .notFound)
    }
}
