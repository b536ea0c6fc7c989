import Foundation
import Kafka

/// Everything `receipt-worker run` is configured with (CONTRACT.md §6), validated once.
public struct WorkerConfiguration: Sendable {
    public struct Topics: Sendable {
        /// `topics.jobs`. Default: receipt-jobs.
        public var jobs = "receipt-jobs"
        /// `topics.results`. Default: receipt-results.
        public var results = "receipt-results"
        /// `topics.retries`. Default: receipt-retries. Accepted for the contract; retries wait in memory here.
        public var retries = "receipt-retries"
        /// `topics.dlq`. Default: receipt-dlq.
        public var dlq = "receipt-dlq"
    }

    public struct Apple: Sendable {
        /// `apple.bundle_id`. Required.
        public var bundleID = ""
        /// `apple.allow_sandbox`. Default: false.
        public var allowSandbox = false
        /// `apple.transaction_id_requires_account_token`: a job with a bare `transaction_id` must carry the
        /// order's `app_account_token` (else `malformed_job`, without a call to Apple). Default: true.
        public var transactionIDRequiresAccountToken = true
        /// `apple.verify_receipt.production_url`, `apple.verify_receipt.sandbox_url`. Default: Apple's.
        public var verifyReceiptProductionURL = "https://buy.itunes.apple.com/verifyReceipt"
        public var verifyReceiptSandboxURL = "https://sandbox.itunes.apple.com/verifyReceipt"
        /// `apple.shared_secret` or `apple.shared_secret_file`.
        public var sharedSecret: String?
        /// `apple.api.production_url`, `apple.api.sandbox_url`. Default: Apple's.
        public var apiProductionURL = "https://api.storekit.apple.com"
        public var apiSandboxURL = "https://api.storekit-sandbox.apple.com"
        /// `apple.api.key_id`, `apple.api.issuer_id`, `apple.api.private_key_file` (its PEM text is kept).
        public var apiKeyID: String?
        public var apiIssuerID: String?
        public var apiPrivateKeyPEM: String?
        /// `apple.root_certificates`: DER or PEM bytes. Default: the compiled-in Apple Root CA - G3.
        public var rootCertificates: [Data] = []
    }

    public var topics = Topics()
    public var apple = Apple()
    /// `jobs.max_bytes`. Default: 262,144.
    public var jobsMaxBytes = 262_144
    /// `ledger.url`. Default: sqlite:receipt-worker.sqlite.
    public var ledgerURL = "sqlite:receipt-worker.sqlite"
    /// `ledger.pool_size`: PostgreSQL connections per replica, each with a thread of its own. Default: 16.
    public var ledgerPoolSize = 16
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
    /// `events.source`: the CloudEvents `ce_source` of results. Default: receipt-worker.
    public var eventSource = "receipt-worker"
    /// `metrics.listen`: host:port of /metrics, /healthz, /readyz. Default: none.
    public var metricsListen: String?
    /// `kafka.*`, passed to librdkafka without the prefix.
    public var kafka: [String: String] = ["bootstrap.servers": "127.0.0.1:9092", "group.id": "receipt-worker"]

    public init() {}
}

extension WorkerConfiguration {
    /// Every key in effect, defaults included, as `key=value` lines for `check-config --print`. Secrets
    /// (the shared secret, the API key, the ledger URL's password, credential-bearing kafka.* values) are
    /// shown as `<set>`, never their value.
    public var effectiveProperties: [String] {
        func duration(_ value: Duration) -> String { String(value.milliseconds) }
        var lines = [
            "topics.jobs=\(topics.jobs)", "topics.results=\(topics.results)", "topics.retries=\(topics.retries)",
            "topics.dlq=\(topics.dlq)", "jobs.max_bytes=\(jobsMaxBytes)", "apple.bundle_id=\(apple.bundleID)",
            "apple.allow_sandbox=\(apple.allowSandbox)",
            "apple.transaction_id_requires_account_token=\(apple.transactionIDRequiresAccountToken)",
            "apple.verify_receipt.production_url=\(apple.verifyReceiptProductionURL)",
            "apple.verify_receipt.sandbox_url=\(apple.verifyReceiptSandboxURL)",
            "apple.shared_secret=\(apple.sharedSecret == nil ? "<not set>" : "<set>")",
            "apple.api.production_url=\(apple.apiProductionURL)", "apple.api.sandbox_url=\(apple.apiSandboxURL)",
            "apple.api.key_id=\(apple.apiKeyID ?? "<not set>")",
            "apple.api.issuer_id=\(apple.apiIssuerID ?? "<not set>")",
            "apple.api.private_key=\(apple.apiPrivateKeyPEM == nil ? "<not set>" : "<set>")",
            "apple.root_certificates=\(apple.rootCertificates.count) certificate(s)",
            "ledger.url=\(Self.withoutPassword(ledgerURL))", "ledger.pool_size=\(ledgerPoolSize)",
            "worker.max_in_flight=\(maxInFlight)", "worker.max_in_flight_bytes=\(maxInFlightBytes)",
            "worker.drain_timeout_ms=\(duration(drainTimeout))",
            "worker.stall_timeout_ms=\(duration(stallTimeout))",
            "retry.max_attempts=\(retry.maxAttempts)", "retry.initial_backoff_ms=\(duration(retry.initialBackoff))",
            "retry.max_backoff_ms=\(duration(retry.maxBackoff))", "http.timeout_ms=\(duration(httpTimeout))",
            "http.ca_file=\(httpCAFile ?? "<system>")", "events.source=\(eventSource)",
            "metrics.listen=\(metricsListen ?? "<off>")",
        ]
        for (key, value) in kafka.sorted(by: { $0.key < $1.key }) {
            lines.append("kafka.\(key)=\(KafkaError.isSensitiveProperty(key) ? "<set>" : value)")
        }
        return lines
    }

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
            return decoded == "password" || decoded == "passfile" ? name + "=<set>" : String(parameter)
        }
        return String(url[...query]) + parameters.joined(separator: "&")
    }
}

/// A configuration problem, naming the key. Never repeats a secret's value.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public let key: String
    public let reason: String
    public var description: String { "configuration: \(key): \(reason)" }
}
