import AppleVerification
import Crypto
public import Foundation
import HTTPServerKit
import Synchronization

/// An App Store simulator speaking Apple's documented protocols over real HTTP: verifyReceipt in the
/// production and sandbox roles, the App Store Server API (Get Transaction Info, Get Notification History, Send
/// Consumption Information), App Store Server Notifications V2 sent to a configured URL, an admin API to create
/// purchases and refund them, and fault injection. Apple's hosts map to path prefixes of one server:
///   /production/verifyReceipt, /sandbox/verifyReceipt
///   /production/inApps/v1/transactions/{id}, /sandbox/inApps/v1/transactions/{id}
///   /production/inApps/v1/notifications/history, /sandbox/inApps/v1/notifications/history
///   /production/inApps/v2/transactions/consumption/{id}, /sandbox/inApps/v2/transactions/consumption/{id}
///   /production/inApps/v1/lookup/{orderId} (Look Up Order ID), .../inApps/v1/transactions/{id}/appAccountToken
///   (Set App Account Token, PUT), .../inApps/v1/transactions/{id}/finish (Finish Transaction, POST),
///   .../inApps/v2/history/{id} (Get Transaction History v2), .../inApps/v1/subscriptions/{id} (Get All
///   Subscription Statuses), .../inApps/v1/subscriptions/extend/{id} (PUT), .../extend/mass (POST) and
///   .../extend/mass/{productId}/{requestIdentifier} (renewal-date extensions, one or all)
///   /admin/... (see `admin(_:segments:)`)
public final class AppStoreSimulator: Sendable {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        /// 0 picks a free port.
        public var port: UInt16 = 0
        public var threads = 2
        /// Bundle id of purchases when the admin request names none.
        public var bundleID = "com.example"
        /// When set, verifyReceipt requires this `password` (the app-specific shared secret), else 21004.
        public var sharedSecret: String?
        /// PEM public key that API tokens must be signed with. Default: Apple's test key (testSigningKey.p8).
        public var apiPublicKeyPEM: String?
        public var apiKeyID = "keyId"
        public var apiIssuerID = "issuerId"
        /// The app's Apple id, in every notification's `data.appAppleId`.
        public var appAppleID: Int64 = 1_234_567_890
        /// Where notifications are posted; nil until the admin API sets one.
        public var notificationURL: String?
        /// The PEM EC key and x5c chain (leaf, intermediate, root; PEM) that sign transactions, notifications and
        /// subscription statuses (JWS). Default: Apple's test credentials, whose chain names no OCSP responder; a
        /// chain whose certificates name one tests revocation checks against a real responder.
        public var signingKeyPEM: String?
        public var signingChainPEM: String?

        public init() {}
    }

    struct State {
        var purchases: [String: Purchase] = [:]
        var receipts: [String: ReceiptRecord] = [:]
        var nextTransaction: UInt64 = 2_000_000_000_000_000
        var faults = FaultPlan()
        var requests: [String: Int] = [:]
        /// Arrival times (ms) of the Server API requests taken, per `role.endpoint`, for rate-limit checks.
        var served: [String: [Int64]] = [:]
        var notifications = NotificationSettings()
        var appAppleID: Int64 = 0
        /// Apps besides the default one, by bundle id.
        var apps: [String: SimulatedApp] = [:]
        var nextNotification = 0
        var consumption: [ConsumptionRecord] = []
        /// When each subscription (by original transaction id) was extended, for Apple's two-in-365-days limit.
        var extensions: [String: [Date]] = [:]
        /// Each single extension's answer by request identifier: the same request again answers the same.
        var extensionAnswers: [String: Result<(Purchase, Data), ExtensionError>] = [:]
        /// Mass extensions by `role/productId/requestIdentifier`.
        var massExtensions: [String: MassExtension] = [:]
        /// How long a mass extension takes before its subscribers are extended and its summary sent.
        var massExtensionDelay: Duration = .milliseconds(500)
    }

    let configuration: Configuration
    let state = Mutex(State())
    let signer: JWSSigner
    /// Signs app receipts (PKCS#7) with the same test chain.
    let receiptSigner: PKCS7Signer
    let apiKey: ECPublicKey
    let sender = NotificationSender()
    private let server: HTTPServer

    public var port: UInt16 { server.port }
    public var baseURL: String { "http://\(configuration.host):\(server.port)" }

    public init(configuration: Configuration = Configuration()) throws {
        self.configuration = configuration
        receiptSigner = try PKCS7Signer(
            keyPEM: TestCredentials.signingKey, certificatesPEM: TestCredentials.signingChain)
        signer = try JWSSigner(
            key: ECPrivateKey(pem: configuration.signingKeyPEM ?? TestCredentials.signingKey),
            x5c: certificatesDER(Data((configuration.signingChainPEM ?? TestCredentials.signingChain).utf8)))
        apiKey = try ECPublicKey(pem: configuration.apiPublicKeyPEM ?? TestCredentials.apiPublicKey)
        let router = Router()
        server = try HTTPServer(host: configuration.host, port: configuration.port, threads: configuration.threads) {
            router.route($0)
        }
        router.simulator = self
        state.withLock { state in
            state.appAppleID = configuration.appAppleID
            state.notifications.url = configuration.notificationURL
        }
    }

    public func start() { server.start() }

    /// Stops serving and sending: deliveries in progress are abandoned.
    public func stop() {
        server.stop()
        sender.stop()
    }

    /// `payload` as a JWS signed with the simulator's test chain: signed transactions and notifications made
    /// without a running simulator (the notification benchmark makes thousands).
    public static func testSigned(_ payload: Data) throws -> String {
        try testSigner.get().sign(payload: payload)
    }

    private static let testSigner = Result {
        try JWSSigner(
            key: ECPrivateKey(pem: TestCredentials.signingKey),
            x5c: certificatesDER(Data(TestCredentials.signingChain.utf8)))
    }

    /// The simulated chain's root (Apple's test root): what a verifier must trust to accept simulated data.
    public static var testRootPEM: String {
        let chain = TestCredentials.signingChain
        guard let start = chain.range(of: "-----BEGIN CERTIFICATE-----", options: .backwards) else { return "" }
        return String(chain[start.lowerBound...])
    }

    func route(_ request: ServerRequest) -> ServerReply {
        let segments = request.path.split(separator: "/").map(String.init)
        guard let first = segments.first else { return .json(404, Self.error(4040000, "not found")) }
        if first == "admin" { return admin(request, segments: Array(segments.dropFirst())) }
        guard first == "production" || first == "sandbox" else { return .json(404, Self.error(4040000, "not found")) }
        let role = first == "production" ? "Production" : "Sandbox"
        let rest = Array(segments.dropFirst())
        let endpoint: String
        if rest == ["verifyReceipt"] {
            endpoint = "verifyReceipt"
        } else if rest.count == 4, rest[0...2] == ["inApps", "v1", "transactions"], request.method == "GET" {
            endpoint = "transactionInfo"
        } else if rest.count == 4, rest[0...2] == ["inApps", "v1", "lookup"], request.method == "GET" {
            endpoint = "lookUpOrderID"
        } else if rest.count == 5, rest[0...2] == ["inApps", "v1", "transactions"], rest[4] == "appAccountToken",
            request.method == "PUT"
        {
            endpoint = "setAppAccountToken"
        } else if rest.count == 5, rest[0...2] == ["inApps", "v1", "transactions"], rest[4] == "finish",
            request.method == "POST"
        {
            endpoint = "finishTransaction"
        } else if rest.count == 4, rest[0...2] == ["inApps", "v2", "history"], request.method == "GET" {
            endpoint = "transactionHistory"
        } else if rest.count == 4, rest[0...2] == ["inApps", "v1", "subscriptions"], request.method == "GET" {
            endpoint = "subscriptionStatuses"
        } else if rest == ["inApps", "v1", "subscriptions", "extend", "mass"], request.method == "POST" {
            endpoint = "massExtendRenewalDate"
        } else if rest.count == 5, rest[0...3] == ["inApps", "v1", "subscriptions", "extend"], request.method == "PUT" {
            endpoint = "extendRenewalDate"
        } else if rest.count == 7, rest[0...4] == ["inApps", "v1", "subscriptions", "extend", "mass"],
            request.method == "GET"
        {
            endpoint = "massExtensionStatus"
        } else if rest == ["inApps", "v1", "notifications", "history"], request.method == "POST" {
            endpoint = "notificationHistory"
        } else if rest.count == 5, rest[0...3] == ["inApps", "v2", "transactions", "consumption"],
            request.method == "PUT"
        {
            endpoint = "consumption"
        } else {
            return .json(404, Self.error(4040000, "not found"))
        }
        // Apple's limits are per app: the default app's lane is `production.transactionInfo`, another's
        // `production.transactionInfo@com.other.game`.
        let bid = endpoint == "verifyReceipt" ? nil : Self.tokenBundleID(request)
        let lane = "\(first).\(endpoint)" + (bid.map { $0 == configuration.bundleID ? "" : "@\($0)" } ?? "")
        let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
        let (faults, limitedUntil) = state.withLock { state -> (FaultPlan, Int64?) in
            state.requests[lane, default: 0] += 1
            // Faults scoped to one app spare the others' requests.
            if let scope = state.faults.bundleID {
                let app = bid ?? Self.receiptBundleID(request, receipts: state.receipts) ?? configuration.bundleID
                guard app == scope else { return (FaultPlan(), nil) }
            }
            guard endpoint != "verifyReceipt" && endpoint != "notificationHistory" else { return (state.faults, nil) }
            // Apple's per-second limit: a sliding window of the requests taken.
            if let limit = state.faults.rateLimitPerSecond, limit > 0 {
                let recent = state.served[lane, default: []].suffix(limit)
                if recent.count == limit, let oldest = recent.first, now - oldest < 1000 {
                    return (state.faults, oldest + 1000)
                }
            }
            state.served[lane, default: []].append(now)
            return (state.faults, nil)
        }
        if let limitedUntil {
            return .json(
                429, Self.error(4290000, "Rate limit exceeded."), headers: [("Retry-After", String(limitedUntil))])
        }
        let delay = faults.delay()
        switch faults.draw() {
        case .drop:
            return .drop(after: delay)
        case .httpError(let status):
            return .text(status, "unavailable", contentType: "text/plain", after: delay)
        case .rateLimited(let seconds):
            // Apple: a UNIX time in milliseconds. The fault plan's numbers come from tests: clamped, not trapped.
            let retryAt = Int64(exactly: ((Date().timeIntervalSince1970 + seconds) * 1000).rounded()) ?? Int64.max
            return .json(
                429, Self.error(4290000, "Rate limit exceeded."),
                headers: [("Retry-After", faults.retryAfterHeader ?? String(retryAt))], after: delay)
        case .garbage:
            return .text(200, "<html><body>502 Bad Gateway</body></html>", contentType: "text/html", after: delay)
        case .status21005 where endpoint == "verifyReceipt":
            return .json(200, Self.json(["status": 21005, "environment": role]), after: delay)
        case .status21002 where endpoint == "verifyReceipt":
            // Apple's bad minute as verifyReceipt has shown it: every receipt "malformed".
            return .json(200, Self.json(["status": 21002]), after: delay)
        case .status21005, .status21002:
            return .json(500, Self.error(5000001, "An unknown retryable error occurred."), after: delay)
        case .apiError(let code) where endpoint != "verifyReceipt":
            // Apple's retryable errors: 4040002 account, 4040004 app, 4040006 original transaction not found
            // "retryable", and 5000001.
            return .json(code == 5000001 ? 500 : 404, Self.error(code, "A retryable error occurred."), after: delay)
        case .none, .apiError:
            let reply =
                switch endpoint {
                case "verifyReceipt": verifyReceipt(request, role: role)
                case "notificationHistory": notificationHistory(request, role: role)
                case "consumption": sendConsumption(request, role: role, id: rest[4])
                case "lookUpOrderID": lookUpOrderID(request, role: role, orderID: rest[3])
                case "setAppAccountToken": setAppAccountToken(request, role: role, id: rest[3])
                case "finishTransaction": finishTransaction(request, role: role, id: rest[3])
                case "transactionHistory": transactionHistory(request, role: role, id: rest[3])
                case "subscriptionStatuses": subscriptionStatuses(request, role: role, id: rest[3])
                case "extendRenewalDate": extendRenewalDate(request, role: role, originalTransactionID: rest[4])
                case "massExtendRenewalDate": extendAllRenewalDates(request, role: role)
                case "massExtensionStatus":
                    massExtensionStatus(request, role: role, productID: rest[5], requestIdentifier: rest[6])
                default: transactionInfo(request, role: role, id: rest[3])
                }
            guard case .respond(let status, let headers, let body, _) = reply else { return reply }
            return .respond(status: status, headers: headers, body: body, after: delay)
        }
    }

    /// The app of a verifyReceipt request, by the receipt it carries.
    static func receiptBundleID(_ request: ServerRequest, receipts: [String: ReceiptRecord]) -> String? {
        let body = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any]
        return (body?["receipt-data"] as? String).flatMap { receipts[$0]?.bundleID }
    }

    static func json(_ object: Any) -> Data {
        (try? JSONSerialization.data(withJSONObject: object)) ?? Data("{}".utf8)
    }

    static func error(_ code: Int, _ message: String) -> Data {
        json(["errorCode": code, "errorMessage": message])
    }
}

/// Lets the server's handler reach the simulator, which owns the server (set once, before `start`): weakly, so
/// the server does not keep the simulator alive.
final class Router: Sendable {
    private struct Target { weak var simulator: AppStoreSimulator? }
    private let target = Mutex(Target())

    var simulator: AppStoreSimulator? {
        get { target.withLock { $0.simulator } }
        set { target.withLock { $0.simulator = newValue } }
    }

    func route(_ request: ServerRequest) -> ServerReply {
        simulator?.route(request) ?? .json(503, AppStoreSimulator.error(5000000, "shutting down"))
    }
}
