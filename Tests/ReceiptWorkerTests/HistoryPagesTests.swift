import AppleVerification
@testable import Flows
import Foundation
import HTTPClient
import HTTPServerKit
import Messaging
import Testing
import Vocabulary

/// Apple's notification history is read to its end, or the replay says it was not: a window counted as read with
/// pages never seen would lose the refunds and renewals on them, and a page token given again must not read the
/// same pages for ever.
@Suite("Get Notification History's pages", .timeLimit(.minutes(1)))
struct HistoryPagesTests {
    /// A replay of the last day against an Apple that answers every page with `body`.
    static func replay(answering body: String) async throws -> HistoryReplay.Report {
        let server = try MicroHTTPServer(host: "127.0.0.1", port: 0) { _ in .json(200, Data(body.utf8)) }
        server.start()
        defer { server.stop() }
        let http = HTTPClient(logger: Handlers.logger)
        defer { http.shutdown() }
        var configuration = AppStoreServerAPIClient.Configuration()
        configuration.productionURL = "http://127.0.0.1:\(server.port)"
        let key = try String(
            contentsOf: Handlers.repository.appendingPathComponent("Tests/AppleClientTests/testSigningKey.p8"),
            encoding: .utf8)
        let tokens = try APITokenIssuer(
            privateKeyPEM: key, keyID: "keyId", issuerID: "issuerId", bundleID: "com.example")
        let api = AppStoreServerAPIClient(configuration: configuration, tokens: tokens, http: http)
        var retry = RetryPolicy()
        retry.maxAttempts = 2
        retry.initialBackoff = .milliseconds(1)
        retry.maxBackoff = .milliseconds(2)
        let replay = HistoryReplay(
            apps: try Handlers.apps(FakeApple()), retry: retry, topic: "notifications", produce: nil)
        return await replay.replay(
            api, environment: .production, from: Date(timeIntervalSinceNow: -86_400), to: Date())
    }

    @Test("the same page token again: the replay ends, saying the history was not read to its end")
    func tokenGivenAgain() async throws {
        let report = try await Self.replay(
            answering: #"{"notificationHistory":[],"hasMore":true,"paginationToken":"page-2"}"#)
        #expect(report.failure?.contains("not read to its end") == true, "\(report.failure ?? "no failure")")
    }

    @Test("more pages without a token to ask for them: a failure, not the history's end")
    func moreWithoutToken() async throws {
        let report = try await Self.replay(answering: #"{"notificationHistory":[],"hasMore":true}"#)
        #expect(report.failure?.contains("hasMore without a paginationToken") == true, "\(report.failure ?? "none")")
    }

    @Test("the last page: read to its end, no failure")
    func lastPage() async throws {
        let report = try await Self.replay(answering: #"{"notificationHistory":[],"hasMore":false}"#)
        #expect(report.failure == nil)
    }
}
