public import Flows
public import Foundation
public import Kafka
import Ledger
import Runtime

/// Everything `receipt-worker run` is configured with (docs/contract.md, section 7), validated once.
public struct WorkerConfiguration: Sendable {
    public struct Topics: Sendable {
        /// `topics.jobs`. Default: receipt-jobs.
        public var jobs = "receipt-jobs"
        /// `topics.results`. Default: receipt-results.
        public var results = "receipt-results"
        /// `topics.retries`. Default: receipt-retries. Where jobs wait whose game's waiting room is full (its Apple
        /// lane paused, its circuit open): parked here, so one game never holds up another's intake.
        public var retries = "receipt-retries"
        /// `topics.dlq`. Default: receipt-dlq.
        public var dlq = "receipt-dlq"
        /// `topics.notifications`: App Store Server Notifications, verified, as received. Default:
        /// receipt-notifications.
        public var notifications = "receipt-notifications"
        /// `topics.consumption`: grant services' answers to consumption requests. Default: receipt-consumption.
        public var consumption = "receipt-consumption"
    }

    /// What every app shares (`apple.*`); each app's own settings, the default app's included, are an ``App``.
    public struct Apple: Sendable {
        /// `apple.finish_transactions`: tell Apple a granted transaction is finished once its event is published
        /// (Finish Transaction; apps with an App Store Server API key). Default: false.
        public var finishTransactions = false
        /// `apple.transaction_id_requires_account_token`: a job with a bare `transaction_id` must carry the
        /// order's `app_account_token` (else `malformed_job`, without a call to Apple). Default: true.
        public var transactionIDRequiresAccountToken = true
        /// `apple.verify_receipt.production_url`, `apple.verify_receipt.sandbox_url`. Default: Apple's.
        public var verifyReceiptProductionURL = "https://buy.itunes.apple.com/verifyReceipt"
        public var verifyReceiptSandboxURL = "https://sandbox.itunes.apple.com/verifyReceipt"
        /// `apple.verify_receipt.status_21002_calls`: calls answered 21002 ("malformed, or a temporary issue")
        /// before a receipt whose signature is not Apple's is denied `invalid_receipt`. Default: 5.
        public var malformedReceiptCalls = 5
        /// `apple.api.production_url`, `apple.api.sandbox_url`. Default: Apple's.
        public var apiProductionURL = "https://api.storekit.apple.com"
        public var apiSandboxURL = "https://api.storekit-sandbox.apple.com"
        /// `apple.root_certificates`: DER or PEM bytes. Default: the compiled-in Apple Root CA - G3.
        public var rootCertificates: [Data] = []
        /// `apple.revocation_check`: whether the certificates of signed data are checked with the OCSP responders
        /// they name (`ocsp`, the default) or not (`off`).
        public var revocationCheck = true
        /// `apple.receipt_verification=server_api`: app receipts verified locally and with Get Transaction
        /// Info instead of verifyReceipt. Default: false (verify_receipt).
        public var receiptsWithServerAPI = false
        /// `apple.receipt_root_certificates`: DER or PEM roots of app receipts' signatures. Default: Apple
        /// Root CA, compiled in.
        public var receiptRootCertificates: [Data] = []
        /// `apple.api.max_requests_per_second`: Apple's limit for the whole pool, per Production lane (a Sandbox
        /// lane: a tenth); each replica takes its share by its partitions (``AppleLimitShare``). Default: 50,
        /// Apple's limit for Get Transaction Info.
        public var apiMaxRequestsPerSecond = 50
        /// `apple.api.max_lane_pause_ms`: the longest a 429's `Retry-After` pauses a lane. Default: 300,000.
        public var apiMaxLanePause: Duration = .seconds(300)
    }

    /// One app (game): `apps.NAME.*`, docs/contract.md section 10. The default app is the app named `default`,
    /// whose keys are also spelled `apple.*` (`apple.bundle_id` is `apps.default.bundle_id`). The URLs, roots,
    /// rate limits and policies of `apple.*` (``Apple``) apply to every app.
    public struct App: Sendable, Equatable {
        /// The default app's name.
        public static let defaultName = "default"
        /// NAME: a-z, 0-9 and _, in metrics and logs.
        public var name: String
        /// `bundle_id`: which jobs (`bundle_id`) and notifications (`bundleId`) are this app's. Required.
        public var bundleID = ""
        /// `app_apple_id`: the app's numeric Apple id, which Production notifications must name.
        public var appAppleID: Int64?
        /// `allow_sandbox`. Default: false.
        public var allowSandbox = false
        /// `shared_secret` or `shared_secret_file`: this app's shared secret; an app without one has none (they
        /// are per app).
        public var sharedSecret: String?
        /// `api.key_id`, `api.issuer_id`, `api.private_key_file` (its PEM text is kept): this app's own API key;
        /// nil in another app: the default app's (one key serves every app of an account).
        public var apiKeyID: String?
        public var apiIssuerID: String?
        public var apiPrivateKeyPEM: String?
        /// `consumption.*`: the app's answers to refund requests nobody else answered.
        public var consumptionPolicy = ConsumptionPolicy()

        public init(name: String) { self.name = name }
    }

    /// What the worker answers to Apple's refund (consumption) request of an app when no grant service answered
    /// a margin before its deadline; sent only where the studio declares that its terms carry the player's
    /// consent to share consumption data.
    /// How a policy answers Apple's consumption requests no grant service answered (``Flows/ConsumptionPolicy``).
    public typealias ConsumptionPolicy = Flows.ConsumptionPolicy

    public var topics = Topics()
    public var apple = Apple()
    /// Every app as configured, the default first, then the others in name order.
    public var apps = [App(name: App.defaultName)]

    /// The default app (`apple.*`, or `apps.default.*`).
    public var defaultApp: App {
        get { apps.first { $0.name == App.defaultName } ?? App(name: App.defaultName) }
        set {
            if let index = apps.firstIndex(where: { $0.name == App.defaultName }) {
                apps[index] = newValue
            } else {
                apps.insert(newValue, at: 0)
            }
        }
    }

    /// Every app, the default first, then the others in name order, each with the default app's API key when it
    /// has none of its own.
    public var allApps: [App] {
        let defaultApp = defaultApp
        return [defaultApp]
            + apps.filter { $0.name != App.defaultName }.sorted { $0.name < $1.name }.map { app in
                guard app.apiKeyID == nil else { return app }
                var app = app
                app.apiKeyID = defaultApp.apiKeyID
                app.apiIssuerID = defaultApp.apiIssuerID
                app.apiPrivateKeyPEM = defaultApp.apiPrivateKeyPEM
                return app
            }
    }
    /// `jobs.max_bytes`. Default: 262,144.
    public var jobsMaxBytes = 262_144
    /// `ledger.url`. Default: sqlite:receipt-worker.sqlite. With `ledger.ssl_root_cert_file`, its `sslrootcert`.
    public var ledgerURL = "sqlite:receipt-worker.sqlite"
    /// `ledger.ssl_root_cert_file`: the CA that signed PostgreSQL's certificate, added to the URL as libpq's
    /// `sslrootcert`: a URL kept in a Secret shared by pods that mount their files at different paths names none.
    public var ledgerSSLRootCert: String?
    /// `ledger.pool_size`: PostgreSQL connections per replica, each with a thread of its own. Default: 16.
    public var ledgerPoolSize = 16
    /// `ledger.schema`: the PostgreSQL schema of the ledger's tables and functions. Default: receipt_worker.
    public var ledgerSchema = PostgresSchema.defaultName
    /// `ledger.results_retention_days`: results stored for re-delivered jobs are deleted after this many
    /// days (grants never are); 0 keeps them forever. Default: 30.
    public var resultsRetentionDays = 30
    /// `ledger.notifications_retention_days`: handled notifications (what makes Apple's retries and backfills
    /// change nothing twice) are deleted after this many days; 0 keeps them. Default: 200, past the 180 days of
    /// history Apple keeps, so a backfill never meets a notification whose handling was forgotten.
    public var notificationsRetentionDays = 200
    /// `ledger.settled_retention_days`: consumption requests past their deadline, reported purchases settled
    /// (claimed, credited and published, refunded), and purchase states a grant carries too (or reinstated),
    /// are deleted after this many days; 0 keeps them. Refunds of purchases never granted are kept. Default:
    /// 200.
    public var settledRetentionDays = 200
    /// `ledger.migrate_on_start`: the worker applies missing PostgreSQL migrations when it starts; false (a
    /// migration Job does it) makes it wait, unready, for a schema that lacks some. Default: true.
    public var ledgerMigrateOnStart = true
    /// `worker.max_in_flight`: jobs being verified at once. Default: 1,000.
    public var maxInFlight = 1_000
    /// `worker.max_in_flight_bytes`: bytes of job messages being verified or waiting at once. Each byte of a
    /// receipt is held about four times while it is verified (the message, the job, the request, libcurl's
    /// copy): 32 MiB keeps a replica of the shipped Kubernetes limit (512 Mi) safe even when every job
    /// carries a 256 KB receipt, and does not limit typical receipts (a few KB) before
    /// `worker.max_in_flight` does. Default: 33,554,432.
    public var maxInFlightBytes = 32 * 1_048_576
    /// `worker.drain_timeout_ms`: how long revoked partitions and shutdown wait for jobs in flight. Default: 20 s.
    public var drainTimeout: Duration = .seconds(20)
    /// `worker.stall_timeout_ms`: a partition with lag that makes no progress this long is reported stalled
    /// (a warning, `/readyz` 503, `receipt_worker_partition_idle_seconds`). Default: 60 s.
    public var stallTimeout: Duration = .seconds(60)
    /// `retry.*`.
    public var retry = RetryPolicy()
    /// `http.timeout_ms`. Default: 10 s.
    public var httpTimeout: Duration = .seconds(10)
    /// `http.ca_file`: CA bundle for Apple's TLS. Default: the system's.
    public var httpCAFile: String?
    /// `http.max_connections_per_host`: each app's connections to one Apple host at once. Default: 512.
    public var httpMaxConnectionsPerHost = 512
    /// `events.source`: the CloudEvents `ce_source` of results. Default: receipt-worker.
    public var eventSource = "receipt-worker"
    /// `notifications.listen`: where the App Store Server Notifications receiver listens. Default: none.
    public var notificationsListen: ListenAddress?
    /// `notifications.unclaimed_after_ms`: how long a purchase Apple reports (`ONE_TIME_CHARGE`, `SUBSCRIBED`)
    /// waits for a job before it is credited by `receipt.unclaimed`; nil (0): never. Default: 1 hour.
    public var unclaimedAfter: Duration? = .seconds(3_600)
    /// `consumption.policy_interval_ms`: how often the refund requests due are answered by the apps' policies
    /// (`apple.consumption.policy`). Default: 1 minute.
    public var consumptionPolicyInterval: Duration = .seconds(60)
    /// `notifications.sweep_interval_ms`: how often Apple's notification history is swept (nil, 0: never).
    /// Default: 1 hour.
    public var sweepInterval: Duration? = .seconds(3_600)
    /// `notifications.sweep_window_ms`: how far back each sweep asks for the deliveries that failed. Default: 1 day.
    public var sweepWindow: Duration = .seconds(86_400)
    /// `notifications.sweep_gap_ms`: a silence of the ledger (no notification handled) this long makes the sweep
    /// read every notification since. Default: 6 hours.
    public var sweepGap: Duration = .seconds(21_600)
    /// `subscriptions.status_check_interval_ms`: how often the subscriptions whose renewal or expiry is overdue
    /// are asked of Apple (Get All Subscription Statuses); nil (0): never. Default: 10 minutes.
    public var statusCheckInterval: Duration? = .seconds(600)
    /// `subscriptions.status_check_after_ms`: how long after a period (or a grace period) ended with nothing
    /// heard a subscription is asked. Default: 1 hour.
    public var statusCheckAfter: Duration = .seconds(3_600)
    /// `subscriptions.status_check_batch`: at most this many subscriptions asked per app and round. Default: 500.
    public var statusCheckBatch = 500
    /// `metrics.listen`: where /metrics, /healthz and /readyz are served. Default: none.
    public var metricsListen: ListenAddress?
    /// `otel.*`: traces exported over OTLP/HTTP (nil endpoint: none, the default).
    public var tracing = Tracing()
    /// `desk.*`: the support desk (`receipt-worker desk`, docs/support-desk.md).
    public var desk = Desk()
    /// `privacy.erasure_key_file`: the erasure's key (32 bytes; docs/support-desk.md, "A player erased").
    public var erasureKey: [UInt8]?

    /// `kafka.*`, passed to librdkafka without the prefix.
    public var kafka: [String: String] = ["bootstrap.servers": "127.0.0.1:9092", "group.id": "receipt-worker"]

    public init() {}

    /// `kafka.group.id`: the workers' consumer group (whose commits the ledger records).
    public var groupID: String { kafka["group.id"] ?? "receipt-worker" }
}

extension WorkerConfiguration {
    /// Keys set another way: `ledger.url` from `ledger.url_file`, and the like.
    static let alternatives = [
        "ledger.url": "ledger.url_file", "ledger.url_file": "ledger.url",
        "apple.shared_secret": "apple.shared_secret_file", "apple.shared_secret_file": "apple.shared_secret",
        "apps.NAME.shared_secret": "apps.NAME.shared_secret_file",
        "apps.NAME.shared_secret_file": "apps.NAME.shared_secret",
    ]

    /// `postgresql://user:secret@host/db?password=secret` → `postgresql://user:<set>@host/db?password=<set>`.
    static func withoutPassword(_ url: String) -> String {
        var url = url
        if let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].lastIndex(of: "@"),
            let colon = url[scheme.upperBound..<at].firstIndex(of: ":")
        {
            url = String(url[..<url.index(after: colon)]) + "<set>" + String(url[at...])
        }
        // libpq also takes the password as a query parameter (any case; percent-encoded names too).
        guard let query = url.firstIndex(of: "?") else { return url }
        let parameters = url[url.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false).map {
            parameter -> String in
            let name = parameter.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            let decoded = (name.removingPercentEncoding ?? name).lowercased()
            // sslpassword: the passphrase of the client's TLS key.
            return ["password", "passfile", "sslpassword"].contains(decoded) ? name + "=<set>" : String(parameter)
        }
        return String(url[...query]) + parameters.joined(separator: "&")
    }
}

/// `host:port` where a server listens: a dotted IPv4 host (`localhost` is 127.0.0.1; none is every
/// interface) and a port (0: the kernel picks one).
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// `0.0.0.0:9100`, `127.0.0.1:9100`, `localhost:9100`, `:9100`; nil for anything else.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        let host = text[..<colon]
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        if host.isEmpty {
            self.host = "0.0.0.0"
        } else if host == "localhost" {
            self.host = "127.0.0.1"
        } else if octets.count == 4, octets.allSatisfy({ UInt8($0) != nil }) {
            self.host = String(host)
        } else {
            return nil
        }
        self.port = port
    }

    public var description: String { "\(host):\(port)" }
}
