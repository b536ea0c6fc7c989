import AppleVerification
import Foundation
import Kafka
import Ledger
import Flows
import Observability

/// Every component's keys and checks (docs/contract.md section 7): where a key is read, its default, and the
/// rules that span keys. The loader (``ConfigurationLoader``) only finds a key here and calls it.
enum ConfigurationKeys {
    /// The keys of every component, the default app's and the two `kafka.*` keys every deployment sets; the
    /// other apps' (`apps.NAME.*`) and librdkafka's own (`kafka.*`) are read by prefix.
    static let all: [ConfigurationKey] =
        topics + runtime + retry + apple + ledger + http + services + desk + privacy + kafka
    static let byName: [String: ConfigurationKey] = Dictionary(all.map { ($0.name, $0) }) { first, _ in first }

    /// The checks each component makes once every key was read, in order.
    static let checks: [@Sendable (inout ConfigurationDraft) throws -> Void] = [
        AppSettings.checkAll, checkTopics, checkApple, checkRetry, checkConsumptionPolicies, checkLedgerCA,
    ]

    /// `ledger.ssl_root_cert_file` becomes the PostgreSQL URL's `sslrootcert`, wherever the URL came from
    /// (`ledger.url`, `ledger.url_file`, the environment), so every part that opens the ledger reads it.
    static func checkLedgerCA(_ draft: inout ConfigurationDraft) throws {
        guard let path = draft.configuration.ledgerSSLRootCert else { return }
        let url = draft.configuration.ledgerURL
        guard url.hasPrefix("postgresql://") || url.hasPrefix("postgres://") else {
            // `check-config --no-files`: a URL in a file is not known yet.
            guard draft.readsFiles else { return }
            throw ConfigurationError(
                .conflictingKeys, key: "ledger.ssl_root_cert_file", reason: "is for a PostgreSQL ledger's TLS only")
        }
        guard !PostgresURL.parameterNames(url).contains("sslrootcert") else {
            throw ConfigurationError(
                .conflictingKeys, key: "ledger.ssl_root_cert_file", reason: "the ledger's URL names an sslrootcert too")
        }
        let encoded = path.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(["&", "=", "+"]))
        draft.configuration.ledgerURL = PostgresURL.appending([("sslrootcert", encoded ?? path)], to: url)
    }

    /// Six topics, six names: a dead-letter topic that is the jobs topic would read each malformed job again and
    /// dead-letter it again, for ever; results on the jobs topic would be read as jobs.
    static func checkTopics(_ draft: inout ConfigurationDraft) throws {
        let topics = draft.configuration.topics
        var named: [String: String] = [:]
        for (key, topic) in [
            ("topics.jobs", topics.jobs), ("topics.results", topics.results), ("topics.retries", topics.retries),
            ("topics.dlq", topics.dlq), ("topics.notifications", topics.notifications),
            ("topics.consumption", topics.consumption),
        ] {
            if let other = named[topic] {
                throw ConfigurationError(
                    .conflictingKeys, key: key, reason: "is \(other)'s topic too: each needs its own")
            }
            named[topic] = key
        }
    }

    /// `consumption.policy`: one of none, decline, grant_prorated, grant_full.
    static func consumptionAnswer(_ value: ConfigurationValue) throws -> WorkerConfiguration.ConsumptionPolicy.Answer {
        guard let answer = WorkerConfiguration.ConsumptionPolicy.Answer(rawValue: value.text) else {
            throw value.invalid("must be none, decline, grant_prorated or grant_full")
        }
        return answer
    }

    /// `consumption.margin_ms`: 1 minute to Apple's 12 hours.
    static func consumptionMargin(_ value: ConfigurationValue) throws -> Duration {
        try value.milliseconds(60_000...43_200_000)
    }

    /// A policy that answers needs the studio's declaration that its terms carry the player's consent: Apple
    /// takes consumption data only with it.
    static func checkConsumptionPolicies(_ draft: inout ConfigurationDraft) throws {
        for app in draft.configuration.allApps
        where app.consumptionPolicy.answer != .none && !app.consumptionPolicy.termsCarryConsent {
            let prefix = AppSettings.prefix(of: app.name)
            throw ConfigurationError(
                .conflictingKeys, key: prefix + "consumption.terms_carry_consent",
                reason:
                    "must be true for \(prefix)consumption.policy=\(app.consumptionPolicy.answer.rawValue): Apple takes"
                    + " consumption data only with the player's consent, which the studio's terms must carry")
        }
    }

    private static let defaults = WorkerConfiguration()

    // MARK: Topics

    static let topics: [ConfigurationKey] = [
        ConfigurationKey("topics.jobs", default: defaults.topics.jobs) {
            $1.configuration.topics.jobs = try $0.nonEmpty()
        },
        ConfigurationKey("topics.results", default: defaults.topics.results) {
            $1.configuration.topics.results = try $0.nonEmpty()
        },
        ConfigurationKey("topics.retries", default: defaults.topics.retries) {
            $1.configuration.topics.retries = try $0.nonEmpty()
        },
        ConfigurationKey("topics.dlq", default: defaults.topics.dlq) {
            $1.configuration.topics.dlq = try $0.nonEmpty()
        },
        ConfigurationKey("topics.notifications", default: defaults.topics.notifications) {
            $1.configuration.topics.notifications = try $0.nonEmpty()
        },
        ConfigurationKey("topics.consumption", default: defaults.topics.consumption) {
            $1.configuration.topics.consumption = try $0.nonEmpty()
        },
    ]

    // MARK: The runtime: jobs, budgets, drain, liveness

    static let runtime: [ConfigurationKey] = [
        ConfigurationKey("jobs.max_bytes", default: String(defaults.jobsMaxBytes)) {
            $1.configuration.jobsMaxBytes = try $0.integer(1_024...10_485_760)
        },
        ConfigurationKey("worker.max_in_flight", default: String(defaults.maxInFlight)) {
            $1.configuration.maxInFlight = try $0.integer(1...100_000)
        },
        ConfigurationKey("worker.max_in_flight_bytes", default: String(defaults.maxInFlightBytes)) {
            $1.configuration.maxInFlightBytes = try $0.integer(1_048_576...17_179_869_184)
        },
        ConfigurationKey("worker.drain_timeout_ms", default: String(defaults.drainTimeout.milliseconds)) {
            $1.configuration.drainTimeout = try $0.milliseconds(0...600_000)
        },
        ConfigurationKey("worker.stall_timeout_ms", default: String(defaults.stallTimeout.milliseconds)) {
            $1.configuration.stallTimeout = try $0.milliseconds(1_000...3_600_000)
        },
    ]

    // MARK: Retries

    static let retry: [ConfigurationKey] = [
        ConfigurationKey("retry.max_attempts", default: String(defaults.retry.maxAttempts)) {
            $1.configuration.retry.maxAttempts = try $0.integer(1...100)
        },
        ConfigurationKey("retry.initial_backoff_ms", default: String(defaults.retry.initialBackoff.milliseconds)) {
            $1.configuration.retry.initialBackoff = try $0.milliseconds(1...600_000)
        },
        ConfigurationKey("retry.max_backoff_ms", default: String(defaults.retry.maxBackoff.milliseconds)) {
            $1.configuration.retry.maxBackoff = try $0.milliseconds(1...3_600_000)
        },
    ]

    static func checkRetry(_ draft: inout ConfigurationDraft) throws {
        if draft.configuration.retry.initialBackoff > draft.configuration.retry.maxBackoff {
            throw ConfigurationError(
                .conflictingKeys, key: "retry.initial_backoff_ms", reason: "must not exceed retry.max_backoff_ms")
        }
    }

    // MARK: Apple: the default app, and what every app shares

    static let apple: [ConfigurationKey] =
        AppSettings.defaultAppKeys + [
            ConfigurationKey("apple.finish_transactions", default: String(defaults.apple.finishTransactions)) {
                $1.configuration.apple.finishTransactions = try $0.boolean()
            },
            ConfigurationKey("apple.allow_insecure_urls", default: "false") { $1.allowInsecureURLs = try $0.boolean() },
            ConfigurationKey(
                "apple.transaction_id_requires_account_token",
                default: String(defaults.apple.transactionIDRequiresAccountToken)
            ) { $1.configuration.apple.transactionIDRequiresAccountToken = try $0.boolean() },
            ConfigurationKey("apple.verify_receipt.production_url", default: defaults.apple.verifyReceiptProductionURL)
            {
                $1.configuration.apple.verifyReceiptProductionURL = try $0.url()
            },
            ConfigurationKey("apple.verify_receipt.sandbox_url", default: defaults.apple.verifyReceiptSandboxURL) {
                $1.configuration.apple.verifyReceiptSandboxURL = try $0.url()
            },
            ConfigurationKey(
                "apple.verify_receipt.status_21002_calls", default: String(defaults.apple.malformedReceiptCalls)
            ) { $1.configuration.apple.malformedReceiptCalls = try $0.integer(1...100) },
            ConfigurationKey("apple.api.production_url", default: defaults.apple.apiProductionURL) {
                $1.configuration.apple.apiProductionURL = try $0.url()
            },
            ConfigurationKey("apple.api.sandbox_url", default: defaults.apple.apiSandboxURL) {
                $1.configuration.apple.apiSandboxURL = try $0.url()
            },
            ConfigurationKey(
                "apple.api.max_requests_per_second", default: String(defaults.apple.apiMaxRequestsPerSecond)
            ) { $1.configuration.apple.apiMaxRequestsPerSecond = try $0.integer(1...100_000) },
            ConfigurationKey(
                "apple.api.max_lane_pause_ms", default: String(defaults.apple.apiMaxLanePause.milliseconds)
            ) {
                $1.configuration.apple.apiMaxLanePause = try $0.milliseconds(0...3_600_000)
            },
            ConfigurationKey("apple.root_certificates") { $1.rootFiles = $0.files() },
            ConfigurationKey("apple.revocation_check", default: "ocsp") { value, draft in
                switch value.text {
                case "ocsp": draft.configuration.apple.revocationCheck = true
                case "off": draft.configuration.apple.revocationCheck = false
                default: throw value.invalid("must be ocsp or off")
                }
            },
            ConfigurationKey("apple.receipt_verification", default: "verify_receipt") { value, draft in
                switch value.text {
                case "verify_receipt": draft.configuration.apple.receiptsWithServerAPI = false
                case "server_api": draft.configuration.apple.receiptsWithServerAPI = true
                default: throw value.invalid("must be verify_receipt or server_api")
                }
            },
            ConfigurationKey("apple.receipt_root_certificates") { $1.receiptRootFiles = $0.files() },
        ]

    /// The roots read (for the worker), and the rules across Apple's shared keys (each app's, the default
    /// app's included, are ``AppSettings``').
    static func checkApple(_ draft: inout ConfigurationDraft) throws {
        var apple = draft.configuration.apple
        func certificates(_ key: String, _ files: [String]?, default root: Data) throws -> [Data] {
            // Set to nothing (a template's empty value), it would trust no root: every receipt or signed
            // transaction refused as not Apple's, never a start-up error.
            if let files, files.isEmpty {
                throw ConfigurationError(
                    .invalidValue, key: key, reason: "names no certificate file (unset, it trusts Apple's root)")
            }
            guard let files, draft.readsWorkerFiles else { return [root] }
            return try files.map { path in
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw ConfigurationError(.unreadableFile, key: key, reason: "cannot read \(path)")
                }
                return data
            }
        }
        apple.rootCertificates = try certificates(
            "apple.root_certificates", draft.rootFiles, default: AppleRootCertificates.appleRootCAG3)
        apple.receiptRootCertificates = try certificates(
            "apple.receipt_root_certificates", draft.receiptRootFiles, default: AppleRootCertificates.appleRootCA)
        draft.configuration.apple = apple
        // Over http the shared secret and the API's bearer token travel in clear, and anyone on the path can
        // answer "status 0": only a test's simulator on loopback, and only when asked for.
        for (key, url) in [
            ("apple.verify_receipt.production_url", apple.verifyReceiptProductionURL),
            ("apple.verify_receipt.sandbox_url", apple.verifyReceiptSandboxURL),
            ("apple.api.production_url", apple.apiProductionURL), ("apple.api.sandbox_url", apple.apiSandboxURL),
        ] where url.hasPrefix("http://") && !draft.allowInsecureURLs {
            throw ConfigurationError(
                .conflictingKeys, key: key,
                reason: "is http://: secrets would travel in clear (apple.allow_insecure_urls=true for tests)")
        }
        let defaultKey = draft.apps[WorkerConfiguration.App.defaultName]?.settings["api.private_key_file"]
        if apple.receiptsWithServerAPI && defaultKey == nil && draft.isWorker {
            throw ConfigurationError(
                .conflictingKeys, key: "apple.receipt_verification",
                reason: "server_api fetches each receipt's transaction from Apple: it needs apple.api.key_id, "
                    + "apple.api.issuer_id and apple.api.private_key_file")
        }
    }

    // MARK: The ledger

    static let ledger: [ConfigurationKey] = [
        ConfigurationKey("ledger.url", default: defaults.ledgerURL) {
            $1.configuration.ledgerURL = try ledgerURL($0.key, $0.text)
        },
        ConfigurationKey("ledger.url_file") { value, draft in
            // The tools never open the ledger. A PostgreSQL URL carries its password: it may live in a
            // mounted secret instead.
            guard draft.purpose != .tool, let contents = try value.fileContents() else { return }
            draft.configuration.ledgerURL = try ledgerURL(
                value.key, contents.trimmingCharacters(in: .whitespacesAndNewlines))
        },
        ConfigurationKey("ledger.ssl_root_cert_file") { value, draft in
            // The tools never open the ledger: the CA need not be mounted where they run.
            guard draft.purpose != .tool else { return }
            draft.configuration.ledgerSSLRootCert = try value.readablePath()
        },
        ConfigurationKey("ledger.pool_size", default: String(defaults.ledgerPoolSize)) {
            $1.configuration.ledgerPoolSize = try $0.integer(1...256)
        },
        ConfigurationKey("ledger.schema", default: defaults.ledgerSchema) { value, draft in
            guard PostgresSchema(name: value.text) != nil else {
                throw value.invalid("must be a lower-case SQL name: a-z, 0-9 and _, 1 to 63")
            }
            draft.configuration.ledgerSchema = value.text
        },
        ConfigurationKey("ledger.results_retention_days", default: String(defaults.resultsRetentionDays)) {
            $1.configuration.resultsRetentionDays = try $0.integer(0...36_500)
        },
        ConfigurationKey(
            "ledger.notifications_retention_days", default: String(defaults.notificationsRetentionDays)
        ) { $1.configuration.notificationsRetentionDays = try $0.integer(0...36_500) },
        ConfigurationKey("ledger.settled_retention_days", default: String(defaults.settledRetentionDays)) {
            $1.configuration.settledRetentionDays = try $0.integer(0...36_500)
        },
        ConfigurationKey("ledger.migrate_on_start", default: String(defaults.ledgerMigrateOnStart)) {
            $1.configuration.ledgerMigrateOnStart = try $0.boolean()
        },
    ]

    private static func ledgerURL(_ key: String, _ value: String) throws -> String {
        guard value.hasPrefix("sqlite:") || value.hasPrefix("postgresql://") || value.hasPrefix("postgres://") else {
            throw ConfigurationError(key: key, reason: "must start with sqlite: or postgresql://")
        }
        return value
    }

    // MARK: HTTP to Apple

    static let http: [ConfigurationKey] = [
        ConfigurationKey("http.timeout_ms", default: String(defaults.httpTimeout.milliseconds)) {
            $1.configuration.httpTimeout = try $0.milliseconds(100...600_000)
        },
        ConfigurationKey("http.ca_file") { $1.configuration.httpCAFile = try $0.readablePath() },
        ConfigurationKey("http.max_connections_per_host", default: String(defaults.httpMaxConnectionsPerHost)) {
            $1.configuration.httpMaxConnectionsPerHost = try $0.integer(1...65_536)
        },
    ]

    // MARK: The services beside the runtime: events, metrics, the notification receiver

    static let services: [ConfigurationKey] = [
        ConfigurationKey("events.source", default: defaults.eventSource) {
            $1.configuration.eventSource = try $0.nonEmpty()
        },
        ConfigurationKey("metrics.listen") { $1.configuration.metricsListen = try $0.listenAddress() },
        ConfigurationKey("otel.endpoint") { value, draft in
            draft.configuration.tracing.endpoint = value.text.isEmpty ? nil : try value.url()
        },
        ConfigurationKey("otel.sample_ratio", default: "1") { value, draft in
            guard let ratio = Double(value.text), (0...1).contains(ratio) else {
                throw value.invalid("must be a number from 0 to 1")
            }
            draft.configuration.tracing.sampleRatio = ratio
        },
        ConfigurationKey("otel.max_queued_spans", default: String(defaults.tracing.maxQueuedSpans)) {
            $1.configuration.tracing.maxQueuedSpans = try $0.integer(64...1_000_000)
        },
        ConfigurationKey("otel.export_interval_ms", default: String(defaults.tracing.exportInterval.milliseconds)) {
            $1.configuration.tracing.exportInterval = try $0.milliseconds(100...60_000)
        },
        ConfigurationKey("otel.max_export_batch_size", default: String(defaults.tracing.batchSize)) {
            $1.configuration.tracing.batchSize = try $0.integer(1...8_192)
        },
        ConfigurationKey("otel.timeout_ms", default: String(defaults.tracing.timeout.milliseconds)) {
            $1.configuration.tracing.timeout = try $0.milliseconds(100...60_000)
        },
        ConfigurationKey("otel.compression", default: "none") { value, draft in
            switch value.text {
            case "none": draft.configuration.tracing.gzip = false
            case "gzip": draft.configuration.tracing.gzip = true
            default: throw value.invalid("must be none or gzip")
            }
        },
        ConfigurationKey("otel.headers") { $1.configuration.tracing.headers = try $0.pairs(headerNames: true) },
        ConfigurationKey("otel.service_name") { value, draft in
            draft.configuration.tracing.serviceName = value.text.isEmpty ? nil : value.text
        },
        ConfigurationKey("otel.resource_attributes") {
            $1.configuration.tracing.resourceAttributes = try $0.pairs(headerNames: false)
        },
        ConfigurationKey("notifications.listen") { $1.configuration.notificationsListen = try $0.listenAddress() },
        ConfigurationKey(
            "notifications.sweep_interval_ms", default: String(defaults.sweepInterval?.milliseconds ?? 0)
        ) {
            $1.configuration.sweepInterval = try $0.interval(1_000...86_400_000)
        },
        ConfigurationKey("notifications.sweep_window_ms", default: String(defaults.sweepWindow.milliseconds)) {
            $1.configuration.sweepWindow = try $0.milliseconds(60_000...15_552_000_000)
        },
        ConfigurationKey("notifications.sweep_gap_ms", default: String(defaults.sweepGap.milliseconds)) {
            $1.configuration.sweepGap = try $0.milliseconds(60_000...15_552_000_000)
        },
        ConfigurationKey(
            "subscriptions.status_check_interval_ms", default: String(defaults.statusCheckInterval?.milliseconds ?? 0)
        ) {
            $1.configuration.statusCheckInterval = try $0.interval(1_000...86_400_000)
        },
        ConfigurationKey(
            "subscriptions.status_check_after_ms", default: String(defaults.statusCheckAfter.milliseconds)
        ) {
            $1.configuration.statusCheckAfter = try $0.milliseconds(0...2_592_000_000)
        },
        ConfigurationKey("subscriptions.status_check_batch", default: String(defaults.statusCheckBatch)) {
            $1.configuration.statusCheckBatch = try $0.integer(1...10_000)
        },
        ConfigurationKey(
            "consumption.policy_interval_ms", default: String(defaults.consumptionPolicyInterval.milliseconds)
        ) {
            $1.configuration.consumptionPolicyInterval = try $0.milliseconds(1_000...3_600_000)
        },
        ConfigurationKey(
            "notifications.unclaimed_after_ms", default: String(defaults.unclaimedAfter?.milliseconds ?? 0)
        ) {
            let after = try $0.milliseconds(0...2_592_000_000)
            $1.configuration.unclaimedAfter = after == .zero ? nil : after
        },
    ]

    // MARK: Kafka

    /// The two keys every deployment sets; any other `kafka.X` is librdkafka's property `X` (``kafkaProperty``).
    static let kafka: [ConfigurationKey] = [
        ConfigurationKey("kafka.bootstrap.servers", default: defaults.kafka["bootstrap.servers"]) {
            $1.configuration.kafka["bootstrap.servers"] = try $0.nonEmpty()
        },
        ConfigurationKey("kafka.group.id", default: defaults.kafka["group.id"]) {
            $1.configuration.kafka["group.id"] = try $0.nonEmpty()
        },
    ]

    /// `kafka.X`: librdkafka's property `X`; `kafka.X_file`: its value read from a file (a secret librdkafka
    /// takes as a value: `sasl.password`, `ssl.key.password`, ...). Nil for a key that is neither.
    static func kafkaProperty(_ value: ConfigurationValue, _ draft: inout ConfigurationDraft) throws -> Bool {
        let key = value.key
        guard key.hasPrefix("kafka."), key.count > 6 else { return false }
        if key.hasSuffix("_file") && key.count > 11 {
            // Not read (check-config --no-files): a placeholder librdkafka accepts, where the secret will be.
            draft.configuration.kafka[String(key.dropFirst(6).dropLast(5))] =
                try value.fileContents()?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "(from \(value.text))"
        } else {
            draft.configuration.kafka[String(key.dropFirst(6))] = value.text
        }
        return true
    }
}
