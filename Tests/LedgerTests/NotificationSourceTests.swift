import Foundation
import TestSupport
import Testing
import Vocabulary

@testable import Ledger

/// The sweep asks the ledger when Apple was last heard: its notifications, never what the worker made itself.
@Suite("The newest of Apple's notifications", .timeLimit(.minutes(2)))
struct NotificationSourceTests {
    @Test(
        "a subscription's status the worker asked for is not news from Apple: the newest notification stays Apple's",
        arguments: Backend.allCases)
    func statusRecordsAreNotDeliveries(backend: Backend) async throws {
        let ledger = try await backend.open()
        func handle(_ id: String, source: String?) async throws {
            _ = try await ledger.apply(
                NotificationChange(id: id, app: .defaultApp, environment: .production, kind: .none, source: source)
            ) { _ in nil }
        }
        #expect(try await ledger.newestNotificationHandled() == nil)
        try await handle("apple-1", source: nil)
        let heard = try #require(try await ledger.newestNotificationHandled())
        try await Task.sleep(for: .milliseconds(20))
        // Apple's deliveries go elsewhere; overdue subscriptions are asked about, and their answers handled.
        for n in 0..<3 { try await handle("status-\(n)", source: "subscription_status") }
        #expect(try await ledger.newestNotificationHandled() == heard)
        try await Task.sleep(for: .milliseconds(20))
        try await handle("apple-2", source: nil)
        #expect(try #require(try await ledger.newestNotificationHandled()) > heard)
    }
}
