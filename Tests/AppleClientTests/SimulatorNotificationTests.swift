import AppStoreSimulator
import AppleVerification
import Foundation
import HTTPClient
import HTTPServerKit
import Synchronization
import Testing
import TestSupport
import Vocabulary

/// A notification receiver on a loopback socket: keeps every request and answers the scripted statuses in turn
/// (the last one from then on).
final class NotificationReceiver: Sendable {
    struct Received: Sendable {
        let body: Data
        let contentType: String?
    }

    private final class Log: Sendable {
        let received = Mutex<[Received]>([])
        let script: Mutex<[Int]>
        init(script: [Int]) { self.script = Mutex(script) }
    }

    private let server: MicroHTTPServer
    private let log: Log

    init(statuses: [Int] = [200]) throws {
        let log = Log(script: statuses)
        self.log = log
        server = try MicroHTTPServer(host: "127.0.0.1", port: 0) { request in
            log.received.withLock {
                $0.append(Received(body: request.body, contentType: request.headers["content-type"]))
            }
            let status = log.script.withLock { script in script.count > 1 ? script.removeFirst() : script.first ?? 200 }
            return .text(status, "")
        }
        server.start()
    }

    deinit { server.stop() }

    var url: String { "http://127.0.0.1:\(server.port)/notifications/apple" }
    var requests: [Received] { log.received.withLock { $0 } }
}

@Suite("The simulator as Apple's notification sender, over HTTP", .timeLimit(.minutes(3)))
struct SimulatorNotificationTests {
    static let appAppleID: Int64 = 1_234_567_890

    private func post(_ harness: SimulatorHarness, _ path: String, _ fields: [String: Any]) async throws -> (
        Int, [String: Any]
    ) {
        let response = try await harness.http.execute(
            HTTPRequest(
                method: .post, url: "\(harness.base)\(path)", body: try JSONSerialization.data(withJSONObject: fields)))
        return (response.status, (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]) ?? [:])
    }

    private func notifications(_ harness: SimulatorHarness) async throws -> [[String: Any]] {
        let response = try await harness.http.execute(HTTPRequest(url: "\(harness.base)/admin/notifications"))
        return (try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]]) ?? []
    }

    private func verifier(_ harness: SimulatorHarness) throws -> SignedDataVerifier {
        var configuration = SignedDataVerifier.Configuration(
            rootCertificates: [Data(AppStoreSimulator.testRootPEM.utf8)], bundleID: "com.example")
        configuration.allowedEnvironments = [.production, .sandbox]
        configuration.appAppleID = Self.appAppleID
        return try SignedDataVerifier(configuration: configuration)
    }

    private func apiRequest(
        _ harness: SimulatorHarness, method: HTTPRequest.Method, path: String, body: [String: Any]
    ) async throws -> HTTPResponse {
        let tokens = try APITokenIssuer(
            privateKeyPEM: SimulatorHarness.apiKeyPEM, keyID: "keyId", issuerID: "issuerId", bundleID: "com.example")
        return try await harness.http.execute(
            HTTPRequest(
                method: method, url: "\(harness.base)\(path)",
                headers: [
                    (name: "Authorization", value: "Bearer \(try tokens.token())"),
                    (name: "Content-Type", value: "application/json"),
                ],
                body: try JSONSerialization.data(withJSONObject: body)))
    }

    @Test(
        "a partial refund posts a REFUND that verifies with the worker's verifier, its transaction showing the revocation"
    )
    func refundNotification() async throws {
        let harness = try SimulatorHarness()
        let receiver = try NotificationReceiver()
        let (configured, _) = try await post(harness, "/admin/notifications/config", ["url": receiver.url])
        #expect(configured == 200)
        let purchase = try await harness.purchase(["product_id": "coins", "type": "consumable"])
        let (status, answer) = try await post(
            harness, "/admin/refund", ["transaction_id": purchase.transactionID, "percentage": 37.5, "reason": 1])
        #expect(status == 200)
        let uuid = try #require(answer["notification_uuid"] as? String)

        #expect(await eventually(timeout: .seconds(60)) { !receiver.requests.isEmpty })
        let request = try #require(receiver.requests.first)
        #expect(request.contentType == "application/json")
        let body = try #require(try JSONSerialization.jsonObject(with: request.body) as? [String: Any])
        let signedPayload = try #require(body["signedPayload"] as? String)

        let verifier = try verifier(harness)
        let notification = try verifier.verifyNotification(signedPayload)
        #expect(notification.notificationType == "REFUND")
        #expect(notification.subtype == nil)
        #expect(notification.notificationUUID == uuid)
        #expect(notification.version == "2.0")
        #expect(notification.data?.appAppleId == Self.appAppleID)
        #expect(notification.data?.environment == .production)
        #expect(notification.data?.bundleVersion == "1")
        let transaction = try verifier.verifyTransaction(try #require(notification.data?.signedTransactionInfo))
        #expect(transaction.transactionId == purchase.transactionID)
        #expect(transaction.revocationDate != nil)
        #expect(transaction.revocationReason == .appIssue)
        #expect(transaction.revocationType == .refundProrated)
        #expect(transaction.revocationPercentage == 37_500)

        // Get Transaction Info shows it revoked too; a reversal clears it and sends REFUND_REVERSED.
        var attempts = 0
        guard
            case .found(let jws) = try await harness.apiClient().transactionInfo(
                id: purchase.transactionID, attempts: &attempts)
        else { Issue.record("not found"); return }
        #expect(try verifier.verifyTransaction(jws).revocationType == .refundProrated)
        let (reversed, _) = try await post(harness, "/admin/reverse-refund", ["transaction_id": purchase.transactionID])
        #expect(reversed == 200)
        #expect(await eventually(timeout: .seconds(60)) { receiver.requests.count == 2 })
        let second = try #require(
            try JSONSerialization.jsonObject(with: receiver.requests[1].body) as? [String: Any])
        let reversal = try verifier.verifyNotification(try #require(second["signedPayload"] as? String))
        #expect(reversal.notificationType == "REFUND_REVERSED")
        let cleared = try verifier.verifyTransaction(try #require(reversal.data?.signedTransactionInfo))
        #expect(cleared.revocationDate == nil && cleared.revocationType == nil && cleared.revocationPercentage == nil)
    }

    @Test("a receiver answering 503 twice, then 200, gets three attempts, all recorded")
    func retries() async throws {
        let harness = try SimulatorHarness()
        // The last two answers are for a second notification, below.
        let receiver = try NotificationReceiver(statuses: [503, 503, 200, 503, 200])
        _ = try await post(
            harness, "/admin/notifications/config", ["url": receiver.url, "retry_delays_ms": [50, 50, 50, 50]])
        let (status, answer) = try await post(harness, "/admin/notify", ["type": "TEST"])
        #expect(status == 200)
        let uuid = try #require(answer["notification_uuid"] as? String)
        var record: [String: Any] = [:]
        let delivered = await eventually(timeout: .seconds(60)) {
            record = (try? await notifications(harness))?.first { $0["notification_uuid"] as? String == uuid } ?? [:]
            return record["delivered"] as? Bool == true
        }
        #expect(delivered)
        let attempts = record["attempts"] as? [[String: Any]] ?? []
        // Each request the receiver got is one recorded attempt (on a loaded machine one may time out on the
        // simulator's side after the receiver answered: recorded with an error instead of its status).
        #expect(attempts.compactMap { $0["status"] as? Int }.last == 200)
        #expect(attempts.count == 3 && attempts.count == receiver.requests.count, "\(attempts)")
        #expect(attempts.allSatisfy { ($0["at"] as? String)?.hasSuffix("Z") == true })
        // Nothing further is sent after the 200. Another notification, sent now, is answered 503 and retried after
        // the same 50 ms: once it is delivered, an attempt the first made after its 200 would have come before.
        let (_, next) = try await post(harness, "/admin/notify", ["type": "TEST"])
        let nextUUID = try #require(next["notification_uuid"] as? String)
        var records: [[String: Any]] = []
        #expect(
            await eventually(timeout: .seconds(60)) {
                records = (try? await notifications(harness)) ?? []
                return records.first { $0["notification_uuid"] as? String == nextUUID }?["delivered"] as? Bool == true
            })
        func attemptsOf(_ id: String) -> [[String: Any]] {
            records.first { $0["notification_uuid"] as? String == id }?["attempts"] as? [[String: Any]] ?? []
        }
        #expect(attemptsOf(uuid).count == 3, "\(attemptsOf(uuid))")
        #expect(attemptsOf(nextUUID).count >= 2, "the second notification was not retried: \(attemptsOf(nextUUID))")
        #expect(receiver.requests.count == 3 + attemptsOf(nextUUID).count)
    }

    @Test("a receiver that is not listening: every attempt fails with an error and the notification stays undelivered")
    func unreachable() async throws {
        let harness = try SimulatorHarness()
        _ = try await post(
            harness, "/admin/notifications/config",
            ["url": "http://127.0.0.1:9/notifications", "retry_delays_ms": [20]])
        _ = try await post(harness, "/admin/notify", ["type": "TEST"])
        var record: [String: Any] = [:]
        let finished = await eventually(timeout: .seconds(60)) {
            record = (try? await notifications(harness))?.first ?? [:]
            return (record["attempts"] as? [[String: Any]])?.count == 2
        }
        #expect(finished)
        #expect(record["delivered"] as? Bool == false)
        #expect((record["attempts"] as? [[String: Any]])?.allSatisfy { $0["error"] is String } == true)
    }

    @Test("stopping the simulator stops the retries of a notification not yet delivered")
    func stopEndsDelivery() async throws {
        let harness = try SimulatorHarness()
        let receiver = try NotificationReceiver(statuses: [503])
        _ = try await post(
            harness, "/admin/notifications/config", ["url": receiver.url, "retry_delays_ms": [300, 300, 300]])
        _ = try await post(harness, "/admin/notify", ["type": "TEST"])
        #expect(await eventually(timeout: .seconds(60)) { receiver.requests.count == 1 })
        harness.simulator.stop()
        // Its retry would come 300 ms after that first attempt. Another simulator, started now on the same schedule,
        // shows when one lands: its receiver answers 503 then 200, and its retry comes after the stopped one's would.
        let witness = try SimulatorHarness()
        let witnessReceiver = try NotificationReceiver(statuses: [503, 200])
        _ = try await post(
            witness, "/admin/notifications/config", ["url": witnessReceiver.url, "retry_delays_ms": [300]])
        _ = try await post(witness, "/admin/notify", ["type": "TEST"])
        #expect(await eventually(timeout: .seconds(60)) { witnessReceiver.requests.count == 2 })
        #expect(receiver.requests.count == 1)
    }

    @Test("Get Notification History pages through every notification of the environment exactly once")
    func historyPagination() async throws {
        let harness = try SimulatorHarness()
        _ = try await post(harness, "/admin/notifications/config", ["history_page_size": 3])
        let start = Int64(Date().timeIntervalSince1970 * 1000) - 1000
        var sent: Set<String> = []
        let purchase = try await harness.purchase(["product_id": "coins"])
        for index in 0..<7 {
            let (_, answer) =
                index == 0
                ? try await post(harness, "/admin/consumption-request", ["transaction_id": purchase.transactionID])
                : try await post(harness, "/admin/notify", ["type": "TEST"])
            sent.insert(try #require(answer["notification_uuid"] as? String))
        }
        _ = try await post(harness, "/admin/notify", ["type": "TEST", "environment": "Sandbox"])

        let verifier = try verifier(harness)
        var seen: [String] = []
        var token: String?
        var pages = 0
        repeat {
            let path =
                "/production/inApps/v1/notifications/history" + (token.map { "?paginationToken=\($0)" } ?? "")
            let response = try await apiRequest(
                harness, method: .post, path: path,
                body: ["startDate": start, "endDate": Int64(Date().timeIntervalSince1970 * 1000) + 60_000])
            #expect(response.status == 200)
            let page = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
            let items = page["notificationHistory"] as? [[String: Any]] ?? []
            #expect(items.count <= 3)
            for item in items {
                let payload = try verifier.verifyNotification(try #require(item["signedPayload"] as? String))
                #expect(payload.data?.environment == .production)
                seen.append(try #require(payload.notificationUUID))
                #expect(item["sendAttempts"] is [Any])
            }
            if pages == 0 {
                // Sent between pages: still returned, once.
                let (_, answer) = try await post(harness, "/admin/notify", ["type": "TEST"])
                sent.insert(try #require(answer["notification_uuid"] as? String))
            }
            pages += 1
            token = page["hasMore"] as? Bool == true ? page["paginationToken"] as? String : nil
        } while token != nil && pages < 10
        #expect(seen.count == sent.count)
        #expect(Set(seen) == sent)
        #expect(pages == 3)

        // Filters: a type, and a transaction.
        let filtered = try await apiRequest(
            harness, method: .post, path: "/production/inApps/v1/notifications/history",
            body: [
                "startDate": start, "endDate": Int64(Date().timeIntervalSince1970 * 1000) + 60_000,
                "transactionId": purchase.transactionID,
            ])
        let items =
            (try JSONSerialization.jsonObject(with: filtered.body) as? [String: Any])?["notificationHistory"]
            as? [[String: Any]]
        #expect(items?.count == 1)

        let bad = try await apiRequest(
            harness, method: .post, path: "/production/inApps/v1/notifications/history?paginationToken=garbage",
            body: ["startDate": start, "endDate": start + 10_000])
        #expect(bad.status == 400)
        #expect(String(decoding: bad.body, as: UTF8.self).contains("4000014"))
    }

    @Test("Send Consumption Information: Apple's validation, 202 recorded, unknown transaction 404, faults apply")
    func consumption() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "coins"])
        let path = "/production/inApps/v2/transactions/consumption/\(purchase.transactionID)"
        let good: [String: Any] = [
            "customerConsented": true, "sampleContentProvided": false, "deliveryStatus": "DELIVERED",
            "consumptionPercentage": 25_000, "refundPreference": "GRANT_PRORATED",
        ]

        var noConsent = good
        noConsent["customerConsented"] = false
        let refused = try await apiRequest(harness, method: .put, path: path, body: noConsent)
        #expect(refused.status == 400)
        #expect(String(decoding: refused.body, as: UTF8.self).contains("4000035"))

        var consentAsNumber = good
        consentAsNumber["customerConsented"] = 1
        #expect(try await apiRequest(harness, method: .put, path: path, body: consentAsNumber).status == 400)

        var badDelivery = good
        badDelivery["deliveryStatus"] = "LOST"
        let delivery = try await apiRequest(harness, method: .put, path: path, body: badDelivery)
        #expect(delivery.status == 400)
        #expect(String(decoding: delivery.body, as: UTF8.self).contains("4000036"))

        var noSample = good
        noSample.removeValue(forKey: "sampleContentProvided")
        let sample = try await apiRequest(harness, method: .put, path: path, body: noSample)
        #expect(String(decoding: sample.body, as: UTF8.self).contains("4000041"))

        var tooMuch = good
        tooMuch["consumptionPercentage"] = 100_001
        #expect(try await apiRequest(harness, method: .put, path: path, body: tooMuch).status == 400)

        // GRANT_PRORATED takes a share above 0 and below 100,000 milliunits; a share with UNDELIVERED_* only 0.
        for share in [0, 100_000] {
            var prorated = good
            prorated["consumptionPercentage"] = share
            #expect(try await apiRequest(harness, method: .put, path: path, body: prorated).status == 400, "\(share)")
        }
        var undelivered = good
        undelivered["deliveryStatus"] = "UNDELIVERED_OTHER"
        undelivered["refundPreference"] = "GRANT_FULL"
        #expect(try await apiRequest(harness, method: .put, path: path, body: undelivered).status == 400)

        var badPreference = good
        badPreference["refundPreference"] = "MAYBE"
        let preference = try await apiRequest(harness, method: .put, path: path, body: badPreference)
        #expect(String(decoding: preference.body, as: UTF8.self).contains("4000044"))

        let accepted = try await apiRequest(harness, method: .put, path: path, body: good)
        #expect(accepted.status == 202)

        let unknown = try await apiRequest(
            harness, method: .put, path: "/production/inApps/v2/transactions/consumption/1999999999999999",
            body: good)
        #expect(unknown.status == 404)
        #expect(String(decoding: unknown.body, as: UTF8.self).contains("4040010"))

        let sandbox = try await apiRequest(
            harness, method: .put, path: "/sandbox/inApps/v2/transactions/consumption/\(purchase.transactionID)",
            body: good)
        #expect(sandbox.status == 404)

        let recorded = try await harness.http.execute(HTTPRequest(url: "\(harness.base)/admin/consumption"))
        let list = try #require(try JSONSerialization.jsonObject(with: recorded.body) as? [[String: Any]])
        #expect(list.count == 1)
        #expect(list.first?["transaction_id"] as? String == purchase.transactionID)
        #expect(list.first?["status"] as? Int == 202)
        let body = list.first?["body"] as? [String: Any]
        #expect(body?["deliveryStatus"] as? String == "DELIVERED")
        #expect(body?["consumptionPercentage"] as? Int == 25_000)

        // The fault plan applies as to Get Transaction Info.
        try await harness.faults(["error_rate": 1.0, "error_status": 503])
        #expect(try await apiRequest(harness, method: .put, path: path, body: good).status == 503)
        try await harness.faults(["rate_limit_rate": 1.0])
        let limited = try await apiRequest(harness, method: .put, path: path, body: good)
        #expect(limited.status == 429)
        #expect(limited.header("Retry-After") != nil)
    }

    @Test("revoke sends REVOKE with FAMILY_REVOKE; a subscription's notification carries renewal info and status")
    func revokeSubscription() async throws {
        let harness = try SimulatorHarness()
        let receiver = try NotificationReceiver()
        _ = try await post(harness, "/admin/notifications/config", ["url": receiver.url, "app_apple_id": 42])
        let purchase = try await harness.purchase(["product_id": "monthly", "type": "subscription"])
        let (status, _) = try await post(harness, "/admin/revoke", ["transaction_id": purchase.transactionID])
        #expect(status == 200)
        #expect(await eventually(timeout: .seconds(60)) { !receiver.requests.isEmpty })
        let first = try #require(receiver.requests.first)
        let body = try #require(try JSONSerialization.jsonObject(with: first.body) as? [String: Any])
        var configuration = SignedDataVerifier.Configuration(
            rootCertificates: [Data(AppStoreSimulator.testRootPEM.utf8)], bundleID: "com.example")
        configuration.appAppleID = 42
        let verifier = try SignedDataVerifier(configuration: configuration)
        let notification = try verifier.verifyNotification(try #require(body["signedPayload"] as? String))
        #expect(notification.notificationType == "REVOKE")
        #expect(notification.data?.status == 5)
        let renewal = try verifier.verifyRenewalInfo(try #require(notification.data?.signedRenewalInfo))
        #expect(renewal.originalTransactionId == purchase.transactionID)
        let transaction = try verifier.verifyTransaction(try #require(notification.data?.signedTransactionInfo))
        #expect(transaction.revocationType == .familyRevoke)
        #expect(transaction.revocationPercentage == nil)
        #expect(transaction.revocationDate != nil)

        // The older refund spelling still answers as before.
        let (refunded, answer) = try await post(harness, "/admin/refunds", ["transaction_id": purchase.transactionID])
        #expect(refunded == 200)
        #expect(answer["refunded"] as? String == purchase.transactionID)
        let (missing, _) = try await post(harness, "/admin/refund", ["transaction_id": "1"])
        #expect(missing == 404)
    }
}
