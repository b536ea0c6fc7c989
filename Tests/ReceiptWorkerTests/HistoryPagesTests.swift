import AppleVerification
@testable import Flows
import Foundation
import HTTPClient
import HTTPServerKit
import Ledger
import Messaging
import Synchronization
import Testing
import Vocabulary

/// Apple's notification history is read to its end, or the replay says it was not: a window counted as read with
/// pages never seen would lose the refunds and renewals on them, and a page token given again must not read the
/// same pages for ever.
@Suite("Get Notification History's pages", .timeLimit(.minutes(1)))
struct HistoryPagesTests {
    /// An Apple at `port` for the app `com.example`, its retries short.
    static func api(port: UInt16, http: HTTPClient) throws -> AppStoreServerAPIClient {
        var configuration = AppStoreServerAPIClient.Configuration()
        configuration.productionURL = "http://127.0.0.1:\(port)"
        let key = try String(
            contentsOf: Handlers.repository.appendingPathComponent("Tests/AppleClientTests/testSigningKey.p8"),
            encoding: .utf8)
        let tokens = try APITokenIssuer(
            privateKeyPEM: key, keyID: "keyId", issuerID: "issuerId", bundleID: "com.example")
        return AppStoreServerAPIClient(configuration: configuration, tokens: tokens, http: http)
    }

    static var retry: RetryPolicy {
        var retry = RetryPolicy()
        retry.maxAttempts = 2
        retry.initialBackoff = .milliseconds(1)
        retry.maxBackoff = .milliseconds(2)
        return retry
    }

    /// A replay of the last day against an Apple that answers every page with `body`.
    static func replay(answering body: String) async throws -> HistoryReplay.Report {
        let server = try MicroHTTPServer(host: "127.0.0.1", port: 0) { _ in .json(200, Data(body.utf8)) }
        server.start()
        defer { server.stop() }
        let http = HTTPClient(logger: Handlers.logger)
        defer { http.shutdown() }
        let replay = HistoryReplay(
            apps: try Handlers.apps(FakeApple()), retry: retry, topic: "notifications", produce: nil)
        return await replay.replay(
            try api(port: server.port, http: http), environment: .production,
            from: Date(timeIntervalSinceNow: -86_400), to: Date())
    }

    @Test("a sweep whose read of a silence stopped short reads it again from its start at the next round")
    func sweepResumes() async throws {
        let answer = Mutex(#"{"notificationHistory":[],"hasMore":true,"paginationToken":"page-2"}"#)
        // Each full read's start (milliseconds), as Apple was asked for it; reads of failures only are left out.
        let asked = Mutex<[Int64]>([])
        let server = try MicroHTTPServer(host: "127.0.0.1", port: 0) { request in
            if let body = try? JSONSerialization.jsonObject(with: request.body) as? [String: Any],
                body["onlyFailures"] == nil, let start = body["startDate"] as? Int64
            {
                asked.withLock { $0.append(start) }
            }
            return .json(200, Data(answer.withLock { $0 }.utf8))
        }
        server.start()
        defer { server.stop() }
        let http = HTTPClient(logger: Handlers.logger)
        defer { http.shutdown() }
        let fake = try Handlers.apps(FakeApple()).defaultApp
        let app = AppleApp(
            name: fake.name, bundleID: fake.bundleID, isDefault: true, purchases: fake.purchases,
            signedData: fake.signedData, consumption: nil, api: try Self.api(port: server.port, http: http))
        let apps = AppleApps([app])
        let sweeper = NotificationSweeper(
            apps: apps, ledger: try LedgerEngine.sqlite(path: ":memory:"),
            replay: HistoryReplay(apps: apps, retry: Self.retry, topic: "notifications", produce: nil),
            settings: .init(interval: .seconds(3_600), window: 86_400, gap: 21_600), metrics: WorkerMetrics(),
            logger: Handlers.logger, holder: "replica-a")
        let first = Date(timeIntervalSince1970: 1_800_000_000)
        // Never a notification: the whole window is read, and Apple's pages break off.
        await sweeper.round(now: first)
        answer.withLock { $0 = #"{"notificationHistory":[],"hasMore":false}"# }
        asked.withLock { $0.removeAll() }
        await sweeper.round(now: first.addingTimeInterval(7_200))
        let full = asked.withLock { $0 }
        #expect(
            full.first == Int64(first.addingTimeInterval(-86_400).timeIntervalSince1970 * 1000),
            "read again from where the first round's read began: \(full)")
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
