import AppleVerification
import Crypto
@testable import Flows
import Foundation
import Kafka
import Ledger
import Observability
@testable import ReceiptWorker
import Runtime
import Synchronization
import Vocabulary

/// What the handlers' rules are tested with: an in-memory ledger (SQLite's `:memory:`, the same SQL and rules
/// as a file), Apple's answers given by the test, signed data made with Apple's test chain, and a handler run
/// outside any runtime. No broker, no simulator, no network: each case takes milliseconds.
enum Handlers {
    static let logger = Logger(label: "handler-test", minimumLevel: .critical)
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func ledger() throws -> LedgerEngine { try LedgerEngine.sqlite(path: ":memory:") }

    /// The jobs' handler with the shipped limits (256 KiB, a transaction id needs its account token).
    /// A 21002's first wait is 1 ms here (1 s in the worker), as the retry policies of these tests are.
    static func jobs(
        _ apps: AppleApps, ledger: any DecisionStore, retry: RetryPolicy = RetryPolicy(),
        malformedReceiptFirstWait: Duration = .milliseconds(1)
    ) -> JobHandler {
        var settings = JobHandler.Settings(
            maxBytes: 262_144, transactionIDRequiresAccountToken: true, retry: retry, resultsTopic: "results",
            eventSource: "receipt-worker")
        settings.malformedReceiptFirstWait = malformedReceiptFirstWait
        return JobHandler(settings: settings, apps: apps, decisions: ledger, metrics: WorkerMetrics(), logger: logger)
    }

    /// The notifications' handler, publishing to `results`.
    static func notifications(
        _ apps: AppleApps, ledger: any PurchaseStateStore, metrics: WorkerMetrics = WorkerMetrics(),
        unclaimedAfter: Duration? = nil, recentlyVerified: RecentlyVerifiedNotifications? = nil
    ) -> NotificationHandler {
        NotificationHandler(
            apps: apps, purchases: ledger, resultsTopic: "results", eventSource: "receipt-worker", metrics: metrics,
            logger: logger, unclaimedAfter: unclaimedAfter, recentlyVerified: recentlyVerified)
    }

    /// Runs `handler` on one message, as the runtime would, without one.
    static func run(
        _ handler: any MessageHandler, _ value: [UInt8], topic: String = "jobs", offset: Int64 = 0,
        headers: [MessageHeader] = []
    ) async throws -> Disposition {
        let message = InboundMessage(
            topic: topic, partition: 0, offset: offset, key: nil, value: value, headers: headers, timestamp: nil)
        var retry = RetryPolicy()
        retry.initialBackoff = .milliseconds(1)
        retry.maxBackoff = .milliseconds(2)
        return try await handler.handle(
            message, context: StandaloneHandlingContext(message: message, handler: handler, retry: retry))
    }

    /// The verifier of signed data for `bundleID`, trusting Apple's test root.
    static func signedData(_ bundleID: String, appAppleID: Int64 = 1234, sandbox: Bool = false) throws
        -> SignedDataVerifier
    {
        var configuration = SignedDataVerifier.Configuration(
            rootCertificates: [try fixture("certs/testCA.der")], bundleID: bundleID)
        configuration.allowedEnvironments = sandbox ? [.production, .sandbox] : [.production]
        configuration.appAppleID = appAppleID
        return try SignedDataVerifier(configuration: configuration)
    }

    /// The default app `com.example` and, with `second`, the app `second` (`com.example.second`), each with
    /// `apple` as Apple's answers.
    static func apps(
        _ apple: FakeApple, second: FakeApple? = nil, sandbox: Bool = false,
        consumption: (any ConsumptionSending)? = nil
    ) throws -> AppleApps {
        var apps = [
            AppleApp(
                name: "default", bundleID: "com.example", isDefault: true, purchases: apple,
                signedData: try signedData("com.example", sandbox: sandbox), consumption: consumption)
        ]
        if let second {
            apps.append(
                AppleApp(
                    name: "second", bundleID: "com.example.second", isDefault: false, purchases: second,
                    signedData: try signedData("com.example.second", appAppleID: 5678, sandbox: sandbox),
                    consumption: consumption))
        }
        return AppleApps(apps)
    }

    static func fixture(_ path: String) throws -> Data {
        try Data(contentsOf: repository.appendingPathComponent("Tests/AppleVerificationTests/Fixtures/\(path)"))
    }

    /// Signs a payload as Apple's servers do, with Apple's test chain.
    static func sign(_ payload: [String: Any]) throws -> String {
        let chain = try ["chain/leaf_cert.der", "chain/intermediate_ca.der", "chain/root_ca.der"].map(fixture)
        let key = try ECPrivateKey(pem: String(decoding: try fixture("chain/testLeaf.key"), as: UTF8.self))
        return try JWSSigner(key: key, x5c: chain).sign(
            payload: try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys]))
    }

    /// Milliseconds since the epoch, as Apple writes times.
    static func milliseconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970 * 1000) }

    /// An App Store notification's request body: `{"signedPayload": JWS}` of `type` about `transaction`.
    static func notification(
        _ type: String, subtype: String? = nil, uuid: String = UUID().uuidString, transaction: [String: Any]?,
        bundleID: String = "com.example",
        environment: String = "Production", signedDate: Date = Date(), extra: [String: Any] = [:]
    ) throws -> [UInt8] {
        var data: [String: Any] = ["bundleId": bundleID, "environment": environment, "bundleVersion": "1"]
        if environment == "Production" { data["appAppleId"] = bundleID == "com.example" ? 1234 : 5678 }
        if var transaction {
            transaction["bundleId"] = bundleID
            // NSNull: signed without the field, as Apple's older transactions and renewal info are.
            if transaction["environment"] is NSNull {
                transaction["environment"] = nil
            } else {
                transaction["environment"] = environment
            }
            transaction["signedDate"] = milliseconds(signedDate)
            data["signedTransactionInfo"] = try sign(transaction)
        }
        data.merge(extra) { $1 }
        var payload: [String: Any] = [
            "notificationType": type, "notificationUUID": uuid, "version": "2.0",
            "signedDate": milliseconds(signedDate), "data": data,
        ]
        if let subtype { payload["subtype"] = subtype }
        return Array(try JSONSerialization.data(withJSONObject: ["signedPayload": try sign(payload)]))
    }

    /// A consumable's signed transaction fields.
    static func transaction(_ id: String, product: String = "coins_100", quantity: Int = 1) -> [String: Any] {
        [
            "transactionId": id, "originalTransactionId": id, "productId": product, "quantity": quantity,
            "type": "Consumable", "purchaseDate": milliseconds(Date(timeIntervalSinceNow: -60)),
            "inAppOwnershipType": "PURCHASED",
        ]
    }

    /// A period of an auto-renewable subscription: its signed transaction fields.
    static func subscription(
        _ id: String, original: String, line: String, product: String = "vip_monthly", expires: Date,
        token: String? = nil
    ) -> [String: Any] {
        var fields: [String: Any] = [
            "transactionId": id, "originalTransactionId": original, "webOrderLineItemId": line, "productId": product,
            "quantity": 1, "type": "Auto-Renewable Subscription", "inAppOwnershipType": "PURCHASED",
            "purchaseDate": milliseconds(expires.addingTimeInterval(-30 * 86_400)),
            "expiresDate": milliseconds(expires),
        ]
        if let token { fields["appAccountToken"] = token }
        return fields
    }

    /// A notification's `signedRenewalInfo` and `status` (1 active, 2 expired, 3 billing retry, 4 grace period).
    static func renewal(
        original: String, autoRenew: Bool = true, status: Int = 1, grace: Date? = nil, signedDate: Date = Date(),
        environment: String? = "Production"
    ) throws -> [String: Any] {
        var info: [String: Any] = [
            "originalTransactionId": original, "autoRenewProductId": "vip_monthly", "productId": "vip_monthly",
            "autoRenewStatus": autoRenew ? 1 : 0, "signedDate": milliseconds(signedDate),
            "isInBillingRetryPeriod": status == 3 || status == 4,
        ]
        if let environment { info["environment"] = environment }
        if let grace { info["gracePeriodExpiresDate"] = milliseconds(grace) }
        return ["signedRenewalInfo": try sign(info), "status": status]
    }

    /// A receipt proof (base64, as a job carries one) standing for `name`.
    static func proof(_ name: String) -> String { Data(name.utf8).base64EncodedString() }

    /// A job message.
    static func job(
        _ id: String, order: String, product: String = "coins_100", proof: [String: Any] = ["receipt": "cmVjZWlwdA=="],
        extra: [String: Any] = [:]
    ) -> [UInt8] {
        var fields: [String: Any] = ["job_id": id, "order_id": order, "user_id": "player-1", "product_id": product]
        fields.merge(proof) { $1 }
        fields.merge(extra) { $1 }
        return Array(try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]))
    }
}

/// Apple's answers, given by a test: a verdict per receipt text (or per transaction id), transient failures
/// first when asked for, and every call counted.
final class FakeApple: PurchaseVerifying, Sendable {
    private struct State {
        var verdicts: [String: AppleVerdict] = [:]
        var failures: [AppleVerificationError] = []
        var calls = 0
    }
    private let state = Mutex(State())

    /// The verdict on proofs whose text (receipt, JWS or transaction id) is `proof`.
    func answer(_ proof: String, _ verdict: AppleVerdict) { state.withLock { $0.verdicts[proof] = verdict } }

    /// A verified purchase of one transaction.
    func verified(
        _ proof: String, transactionID: String, product: String = "coins_100", quantity: Int = 1,
        environment: AppleEnvironment = .production, type: ProductType = .consumable, token: String? = nil,
        revoked: Date? = nil, expires: Date? = nil, original: String? = nil, line: String? = nil,
        revokedShare: Int? = nil, value: PurchaseValue = PurchaseValue()
    ) {
        var transaction = AppleTransaction(
            transactionID: transactionID, originalTransactionID: original ?? transactionID, productID: product,
            quantity: quantity, appAccountToken: token, purchaseDate: Date(timeIntervalSinceNow: -60),
            expiresDate: expires, revocationDate: revoked, productType: type, webOrderLineItemID: line)
        transaction.revocationShare = revokedShare
        transaction.value = value
        answer(
            proof,
            .verified(
                VerifiedPurchase(
                    source: .receipt, bundleID: "com.example", environment: environment, transactions: [transaction])))
    }

    /// The next calls fail with these, in order, before any verdict.
    func fail(_ errors: [AppleVerificationError]) { state.withLock { $0.failures += errors } }

    var calls: Int { state.withLock { $0.calls } }

    func verify(_ proof: PurchaseProof, selecting: ReceiptSelection?, attempts: inout Int) async throws
        -> AppleVerdict
    {
        attempts += 1
        let key: String =
            switch proof {
            case .receipt(let text), .signedTransaction(let text), .transactionID(let text): text
            }
        let answer = state.withLock { state -> Result<AppleVerdict, AppleVerificationError> in
            state.calls += 1
            if !state.failures.isEmpty { return .failure(state.failures.removeFirst()) }
            return .success(
                state.verdicts[key] ?? .rejected(.invalidReceipt, detail: "the test gave no verdict for this proof"))
        }
        return try answer.get()
    }
}

/// Send Consumption Information, as a test answers it.
final class FakeConsumption: ConsumptionSending, Sendable {
    private let answers = Mutex<[Result<AppStoreServerAPIClient.ConsumptionDelivery, AppleVerificationError>]>([])
    private let sent = Mutex<[(transactionID: String, body: String, environment: AppleEnvironment)]>([])
    let allowsSandbox: Bool

    init(allowsSandbox: Bool = false) { self.allowsSandbox = allowsSandbox }

    /// The next calls' answers, in order; accepted once they run out.
    func answer(_ results: [Result<AppStoreServerAPIClient.ConsumptionDelivery, AppleVerificationError>]) {
        answers.withLock { $0 += results }
    }

    var bodies: [(transactionID: String, body: String, environment: AppleEnvironment)] { sent.withLock { $0 } }

    func sendConsumption(transactionID: String, body: Data, environment: AppleEnvironment, attempts: inout Int)
        async throws -> AppStoreServerAPIClient.ConsumptionDelivery
    {
        attempts += 1
        sent.withLock { $0.append((transactionID, String(decoding: body, as: UTF8.self), environment)) }
        let next = answers.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        return try (next ?? .success(.accepted)).get()
    }
}

extension Disposition {
    /// The JSON values of the records to publish (none for a dead letter without events).
    var events: [[String: Any]] {
        let records: [OutboundRecord]
        switch self {
        case .publish(let published): records = published
        case .deadLetter(_, let after): records = after
        case .letGo: records = []
        }
        return records.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.value))) as? [String: Any] }
    }

    var event: [String: Any]? { events.count == 1 ? events[0] : nil }

    var deadLetter: DeadLetter? {
        if case .deadLetter(let letter, _) = self { return letter }
        return nil
    }

    /// The CloudEvents headers of the first record.
    var headers: [String: String] {
        guard case .publish(let records) = self, let first = records.first else { return [:] }
        return Dictionary(first.headers.map { ($0.name, $0.stringValue ?? "") }) { first, _ in first }
    }
}
