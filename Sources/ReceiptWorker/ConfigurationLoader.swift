import AppleVerification
import Foundation
import Kafka
import Ledger
import Runtime
import Observability

/// Reads `key=value` properties (`#` and `!` start comments), then `RECEIPT_WORKER_*` environment
/// variables, then `--set key=value` overrides (later wins) into a ``WorkerConfiguration``. Unknown keys,
/// bad values and unreadable files stop start-up with the key's name.
///
/// Environment variables: `RECEIPT_WORKER_` + the key in capitals with each `.` written `__`; `_` stays:
/// `apple.bundle_id` is `RECEIPT_WORKER_APPLE__BUNDLE_ID`, `kafka.bootstrap.servers` is
/// `RECEIPT_WORKER_KAFKA__BOOTSTRAP__SERVERS`. Keys under `kafka.` are lower-cased back, as librdkafka's are.
public enum ConfigurationLoader {
    public static let environmentPrefix = "RECEIPT_WORKER_"

    /// What the configuration is for: the worker needs `apple.bundle_id`; the command-line tools
    /// (`enqueue`, `results`, `dlq replay`) only read the Kafka and topic keys; `ledger` commands only the
    /// ledger's. Neither kind of tool reads Apple's key, shared secret or roots.
    public enum Purpose: Sendable { case worker, tool, ledger }

    /// Every key `build` accepts besides `kafka.*` (and the two `kafka.*` keys every deployment sets).
    /// config/worker.properties shows each one; a test holds the two together.
    public static let documentedKeys =
        [
            "topics.jobs", "topics.results", "topics.retries", "topics.dlq", "topics.notifications",
            "topics.consumption",
            "jobs.max_bytes", "apple.bundle_id", "apple.app_apple_id", "notifications.listen",
            "apple.allow_sandbox", "apple.allow_insecure_urls", "apple.transaction_id_requires_account_token",
            "apple.verify_receipt.production_url",
            "apple.verify_receipt.sandbox_url",
            "apple.shared_secret",
            "apple.shared_secret_file", "apple.api.production_url", "apple.api.sandbox_url", "apple.api.key_id",
            "apple.api.issuer_id",
            "apple.api.private_key_file", "apple.api.max_requests_per_second", "apple.api.max_lane_pause_ms",
            "apple.root_certificates", "apple.receipt_verification", "apple.receipt_root_certificates", "ledger.url",
            "ledger.url_file", "ledger.pool_size",
            "ledger.schema", "ledger.results_retention_days",
            "worker.max_in_flight", "worker.max_in_flight_bytes",
            "worker.drain_timeout_ms", "worker.stall_timeout_ms", "retry.max_attempts", "retry.initial_backoff_ms",
            "retry.max_backoff_ms",
            "http.timeout_ms",
            "http.ca_file", "events.source", "metrics.listen", "kafka.bootstrap.servers", "kafka.group.id",
        ] + appKeys.map { "apps.NAME.\($0)" }

    /// The keys of each further app, after `apps.NAME.` (docs/contract.md, sections 7 and 10).
    static let appKeys = [
        "bundle_id", "app_apple_id", "allow_sandbox", "shared_secret", "shared_secret_file", "api.key_id",
        "api.issuer_id", "api.private_key_file",
    ]

    public static func load(
        file: String?, overrides: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
        purpose: Purpose = .worker
    ) throws -> WorkerConfiguration {
        try loadWithSources(file: file, overrides: overrides, environment: environment, purpose: purpose).configuration
    }

    /// ``load(file:overrides:environment:purpose:)``, keeping each key's winning value and where it came from
    /// (for `check-config --print`). An error about a key names its source and, unless it is a secret, its
    /// value: `worker.max_in_flight=lots (from worker.properties:12): must be an integer ...`.
    public static func loadWithSources(
        file: String?, overrides: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
        purpose: Purpose = .worker
    ) throws -> LoadedConfiguration {
        var settings: [LoadedConfiguration.Setting] = []
        if let file {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw ConfigurationError(key: "--config", reason: "cannot read \(file)")
            }
            settings = try numberedProperties(text: text, source: file).map {
                .init(key: $0.key, value: $0.value, source: .file(path: file, line: $0.line))
            }
        }
        for (variable, value) in environment.sorted(by: { $0.key < $1.key }) where isKeyVariable(variable) {
            settings.append(
                .init(key: key(forEnvironmentVariable: variable), value: value, source: .environment(variable)))
        }
        for variable in ["LOG_LEVEL", environmentPrefix + "LOG_LEVEL"] {
            if let level = environment[variable], Logger.Level(name: level) == nil {
                throw ConfigurationError(
                    key: variable,
                    reason: "must be one of \(Logger.Level.allCases.map(\.name).joined(separator: ", "))")
            }
        }
        for override in overrides {
            guard let equals = override.firstIndex(of: "=") else {
                throw ConfigurationError(key: "--set", reason: "expected key=value")
            }
            settings.append(
                .init(
                    key: String(override[..<equals]), value: String(override[override.index(after: equals)...]),
                    source: .commandLine))
        }
        // Later sources win: only each key's last value is validated (a bad value overridden is no error).
        var seen: Set<String> = []
        settings = settings.reversed().filter { seen.insert($0.key).inserted }.reversed()
        do {
            let configuration = try build(settings.map { ($0.key, $0.value) }, purpose: purpose)
            return LoadedConfiguration(configuration: configuration, settings: settings)
        } catch let error as ConfigurationError {
            guard let setting = settings.last(where: { $0.key == error.key }) else { throw error }
            // An unknown key may be a secret's key mistyped (apps.x.sharedsecret): if it looks like one, its
            // value is not shown.
            let secretLooking = ["secret", "password", "passwd", "token", "private", "credential"].contains {
                setting.key.lowercased().contains($0)
            }
            let hidden = error.reason.hasPrefix("unknown key") && secretLooking
            let shown = hidden ? "" : printable(setting.key, setting.value).map { "=" + displayed($0) } ?? ""
            throw ConfigurationError(key: "\(error.key)\(shown) (from \(setting.source))", reason: error.reason)
        }
    }

    /// A key's value as it may be shown in an error or by `check-config --print`; nil for a secret (the
    /// shared secret, a password-bearing ledger URL, librdkafka's credentials). The `*_file` keys hold
    /// paths, which are not secret.
    public static func printable(_ key: String, _ value: String) -> String? {
        if key.hasSuffix("_file") { return value }
        if key == "apple.shared_secret" || key.hasPrefix("apps.") && key.hasSuffix(".shared_secret") { return nil }
        if key.hasPrefix("kafka.") && KafkaError.isSensitiveProperty(String(key.dropFirst(6))) { return nil }
        if key == "ledger.url" && WorkerConfiguration.withoutPassword(value) != value { return nil }
        return value
    }

    /// A value as an error shows it: quoted when it has spaces, control characters replaced, at most 80
    /// characters (a value may be anything a file or a variable holds).
    static func displayed(_ value: String) -> String {
        var text = String(
            value.unicodeScalars.prefix(80).map { $0.properties.generalCategory == .control ? "?" : Character($0) })
        if value.unicodeScalars.count > 80 { text += "..." }
        return text.isEmpty || text.contains(" ") ? "\"\(text)\"" : text
    }

    /// The `key=value` lines of a properties file's text, in order, keys and values trimmed; blank lines and
    /// comments (`#`, `!`) skipped. `source` names the file in errors (`worker.properties:12`).
    package static func properties(text: String, source: String) throws -> [(key: String, value: String)] {
        try numberedProperties(text: text, source: source).map { ($0.key, $0.value) }
    }

    static func numberedProperties(text: String, source: String) throws -> [(key: String, value: String, line: Int)] {
        var properties: [(key: String, value: String, line: Int)] = []
        var lines: [String: Int] = [:]  // key -> the line that set it
        // Any line ending: "\r\n" is one Character in Swift, so splitting on "\n" would keep a Windows file
        // as one line (a first-line comment would swallow every setting).
        for (number, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
            .enumerated()
        {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix("!") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigurationError(key: "\(source):\(number + 1)", reason: "expected key=value")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            // Two lines for one key: one of them is a mistake, and which one wins is not obvious.
            if let first = lines[key] {
                throw ConfigurationError(
                    key: "\(source):\(number + 1)", reason: "\(key) is already set at line \(first)")
            }
            lines[key] = number + 1
            properties.append(
                (key, line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces), number + 1))
        }
        return properties
    }

    /// "; did you mean apple.bundle_id?" for a key a typo away from a known one, else "".
    static func suggestion(for key: String) -> String {
        let scored = documentedKeys.map { ($0, editDistance(key, $0)) }.min { $0.1 < $1.1 }
        guard let (known, distance) = scored, distance <= max(2, key.count / 5) else { return "" }
        return "; did you mean \(known)?"
    }

    private static func editDistance(_ left: String, _ right: String) -> Int {
        let a = Array(left.utf8)
        let b = Array(right.utf8)
        guard a.count < 200, b.count < 200 else { return Int.max }
        var previous = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(b.count, 1) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// Whether a `RECEIPT_WORKER_*` variable names a key. Every key has a dot, so its variable has `__`;
    /// others are not configuration and are ignored on purpose: Kubernetes injects
    /// `RECEIPT_WORKER_PORT`, `RECEIPT_WORKER_SERVICE_HOST`, ... for a Service of that name, and
    /// `RECEIPT_WORKER_LOG_LEVEL` is the log level (like `LOG_LEVEL`).
    static func isKeyVariable(_ variable: String) -> Bool {
        variable.hasPrefix(environmentPrefix) && variable.dropFirst(environmentPrefix.count).contains("__")
    }

    /// `RECEIPT_WORKER_APPLE__BUNDLE_ID` → `apple.bundle_id`.
    public static func key(forEnvironmentVariable variable: String) -> String {
        variable.dropFirst(environmentPrefix.count).lowercased().replacingOccurrences(of: "__", with: ".")
    }

    /// `apple.bundle_id` → `RECEIPT_WORKER_APPLE__BUNDLE_ID`.
    public static func environmentVariable(forKey key: String) -> String {
        environmentPrefix + key.uppercased().replacingOccurrences(of: ".", with: "__")
    }

    package static func build(_ properties: [(key: String, value: String)], purpose: Purpose = .worker) throws
        -> WorkerConfiguration
    {
        var configuration = WorkerConfiguration()
        var sharedSecretFile: String?
        var apiKeyFileGiven = false
        var allowInsecureURLs = false
        var rootFiles: [String]?
        var receiptRootFiles: [String]?
        var apps: [String: AppSettings] = [:]
        for (key, value) in properties {
            func integer(_ range: ClosedRange<Int>) throws -> Int {
                guard let number = Int(value), range.contains(number) else {
                    throw ConfigurationError(
                        key: key, reason: "must be an integer from \(range.lowerBound) to \(range.upperBound)")
                }
                return number
            }
            func boolean() throws -> Bool {
                switch value.lowercased() {
                case "true": return true
                case "false": return false
                default: throw ConfigurationError(key: key, reason: "must be true or false")
                }
            }
            func url() throws -> String {
                guard value.hasPrefix("https://") || value.hasPrefix("http://") else {
                    throw ConfigurationError(key: key, reason: "must be an http(s) URL")
                }
                return value
            }
            switch key {
            case "topics.jobs": configuration.topics.jobs = try nonEmpty(key, value)
            case "topics.results": configuration.topics.results = try nonEmpty(key, value)
            case "topics.retries": configuration.topics.retries = try nonEmpty(key, value)
            case "topics.dlq": configuration.topics.dlq = try nonEmpty(key, value)
            case "topics.notifications": configuration.topics.notifications = try nonEmpty(key, value)
            case "topics.consumption": configuration.topics.consumption = try nonEmpty(key, value)
            case "apple.app_apple_id": configuration.apple.appAppleID = try appAppleID(key, value)
            case "notifications.listen": configuration.notificationsListen = try listenAddress(key, value)
            case "jobs.max_bytes": configuration.jobsMaxBytes = try integer(1_024...10_485_760)
            case "apple.bundle_id": configuration.apple.bundleID = try nonEmpty(key, value)
            case "apple.allow_sandbox": configuration.apple.allowSandbox = try boolean()
            case "apple.allow_insecure_urls": allowInsecureURLs = try boolean()
            case "apple.transaction_id_requires_account_token":
                configuration.apple.transactionIDRequiresAccountToken = try boolean()
            case "apple.verify_receipt.production_url": configuration.apple.verifyReceiptProductionURL = try url()
            case "apple.verify_receipt.sandbox_url": configuration.apple.verifyReceiptSandboxURL = try url()
            case "apple.shared_secret": configuration.apple.sharedSecret = value.isEmpty ? nil : value
            case "apple.shared_secret_file": sharedSecretFile = value
            case "apple.api.production_url": configuration.apple.apiProductionURL = try url()
            case "apple.api.sandbox_url": configuration.apple.apiSandboxURL = try url()
            case "apple.api.key_id": configuration.apple.apiKeyID = try nonEmpty(key, value)
            case "apple.api.max_requests_per_second":
                configuration.apple.apiMaxRequestsPerSecond = try integer(1...100_000)
            case "apple.api.max_lane_pause_ms":
                configuration.apple.apiMaxLanePause = .milliseconds(try integer(0...3_600_000))
            case "apple.api.issuer_id": configuration.apple.apiIssuerID = try nonEmpty(key, value)
            case "apple.api.private_key_file":
                // The Kafka-only tools (enqueue, results, dlq replay) never call Apple: an on-call engineer
                // running them must not need the App Store key readable.
                if purpose == .worker { configuration.apple.apiPrivateKeyPEM = try read(key, value) }
                apiKeyFileGiven = true
            case "apple.root_certificates":
                rootFiles = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            case "apple.receipt_verification":
                switch value {
                case "verify_receipt": configuration.apple.receiptsWithServerAPI = false
                case "server_api": configuration.apple.receiptsWithServerAPI = true
                default: throw ConfigurationError(key: key, reason: "must be verify_receipt or server_api")
                }
            case "apple.receipt_root_certificates":
                receiptRootFiles = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            case "ledger.url": configuration.ledgerURL = try ledgerURL(key, value)
            case "ledger.pool_size": configuration.ledgerPoolSize = try integer(1...256)
            case "ledger.schema":
                guard PostgresSchema(name: value) != nil else {
                    throw ConfigurationError(key: key, reason: "must be a lower-case SQL name: a-z, 0-9 and _, 1 to 63")
                }
                configuration.ledgerSchema = value
            case "ledger.results_retention_days": configuration.resultsRetentionDays = try integer(0...36_500)
            case "ledger.url_file" where purpose == .tool: break  // the tools never open the ledger
            case "ledger.url_file":
                // A PostgreSQL URL carries its password: it may live in a mounted secret instead.
                configuration.ledgerURL = try ledgerURL(
                    key, read(key, value).trimmingCharacters(in: .whitespacesAndNewlines))
            case "worker.max_in_flight": configuration.maxInFlight = try integer(1...100_000)
            case "worker.max_in_flight_bytes":
                configuration.maxInFlightBytes = try integer(1_048_576...17_179_869_184)
            case "worker.drain_timeout_ms": configuration.drainTimeout = .milliseconds(try integer(0...600_000))
            case "worker.stall_timeout_ms": configuration.stallTimeout = .milliseconds(try integer(1_000...3_600_000))
            case "retry.max_attempts": configuration.retry.maxAttempts = try integer(1...100)
            case "retry.initial_backoff_ms":
                configuration.retry.initialBackoff = .milliseconds(try integer(1...600_000))
            case "retry.max_backoff_ms": configuration.retry.maxBackoff = .milliseconds(try integer(1...3_600_000))
            case "http.timeout_ms": configuration.httpTimeout = .milliseconds(try integer(100...600_000))
            case "http.ca_file": configuration.httpCAFile = try readable(key, value)
            case "events.source": configuration.eventSource = try nonEmpty(key, value)
            case "metrics.listen": configuration.metricsListen = try listenAddress(key, value)
            case _ where key.hasPrefix("apps."):
                try appSetting(key, value, into: &apps, purpose: purpose)
            case _ where key.hasPrefix("kafka.") && key.hasSuffix("_file") && key.count > 11:
                // A secret librdkafka reads as a value (sasl.password, ssl.key.password, ...), kept in a file.
                configuration.kafka[String(key.dropFirst(6).dropLast(5))] = try read(key, value).trimmingCharacters(
                    in: .whitespacesAndNewlines)
            case _ where key.hasPrefix("kafka.") && key.count > 6:
                configuration.kafka[String(key.dropFirst(6))] = value
            default:
                throw ConfigurationError(key: key, reason: "unknown key" + suggestion(for: key))
            }
        }
        if let sharedSecretFile, purpose == .worker {
            configuration.apple.sharedSecret = try read("apple.shared_secret_file", sharedSecretFile)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        func certificates(_ key: String, _ files: [String]?, default root: Data) throws -> [Data] {
            guard let files, purpose == .worker else { return [root] }
            return try files.map { path in
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw ConfigurationError(key: key, reason: "cannot read \(path)")
                }
                return data
            }
        }
        configuration.apple.rootCertificates = try certificates(
            "apple.root_certificates", rootFiles, default: AppleRootCertificates.appleRootCAG3)
        configuration.apple.receiptRootCertificates = try certificates(
            "apple.receipt_root_certificates", receiptRootFiles, default: AppleRootCertificates.appleRootCA)
        guard !configuration.apple.bundleID.isEmpty || purpose != .worker else {
            throw ConfigurationError(key: "apple.bundle_id", reason: "is required")
        }
        // Over http the shared secret and the API's bearer token travel in clear, and anyone on the path can
        // answer "status 0": only a test's simulator on loopback, and only when asked for.
        for (key, url) in [
            ("apple.verify_receipt.production_url", configuration.apple.verifyReceiptProductionURL),
            ("apple.verify_receipt.sandbox_url", configuration.apple.verifyReceiptSandboxURL),
            ("apple.api.production_url", configuration.apple.apiProductionURL),
            ("apple.api.sandbox_url", configuration.apple.apiSandboxURL),
        ] where url.hasPrefix("http://") && !allowInsecureURLs {
            throw ConfigurationError(
                key: key, reason: "is http://: secrets would travel in clear (apple.allow_insecure_urls=true for tests)"
            )
        }
        if configuration.notificationsListen != nil && configuration.apple.appAppleID == nil && purpose == .worker {
            throw ConfigurationError(
                key: "apple.app_apple_id",
                reason: "is required with notifications.listen: Production notifications must name this app")
        }
        configuration.apps = try apps.keys.sorted().map { try apps[$0]!.app(name: $0, purpose: purpose) }
        try checkApps(configuration, purpose: purpose)
        if configuration.retry.initialBackoff > configuration.retry.maxBackoff {
            throw ConfigurationError(key: "retry.initial_backoff_ms", reason: "must not exceed retry.max_backoff_ms")
        }
        let api = [configuration.apple.apiKeyID != nil, configuration.apple.apiIssuerID != nil, apiKeyFileGiven]
        if api.contains(true) && api.contains(false) {
            throw ConfigurationError(
                key: "apple.api.key_id",
                reason: "apple.api.key_id, apple.api.issuer_id and apple.api.private_key_file go together")
        }
        if configuration.apple.receiptsWithServerAPI && !apiKeyFileGiven && purpose == .worker {
            throw ConfigurationError(
                key: "apple.receipt_verification",
                reason: "server_api fetches each receipt's transaction from Apple: it needs apple.api.key_id, "
                    + "apple.api.issuer_id and apple.api.private_key_file")
        }
        return configuration
    }

    /// One app's keys as read, before the files they name are read and the whole is checked.
    private struct AppSettings {
        var settings: [String: String] = [:]

        func app(name: String, purpose: Purpose) throws -> WorkerConfiguration.App {
            var app = WorkerConfiguration.App(name: name)
            let prefix = "apps.\(name)."
            app.bundleID = settings["bundle_id"] ?? ""
            guard !app.bundleID.isEmpty || purpose != .worker else {
                throw ConfigurationError(key: prefix + "bundle_id", reason: "is required for every app")
            }
            app.appAppleID = try settings["app_apple_id"].map { try appAppleID(prefix + "app_apple_id", $0) }
            app.allowSandbox = settings["allow_sandbox"] == "true"
            app.sharedSecret = settings["shared_secret"].flatMap { $0.isEmpty ? nil : $0 }
            app.apiKeyID = settings["api.key_id"]
            app.apiIssuerID = settings["api.issuer_id"]
            let given = [app.apiKeyID != nil, app.apiIssuerID != nil, settings["api.private_key_file"] != nil]
            if given.contains(true) && given.contains(false) {
                throw ConfigurationError(
                    key: prefix + "api.key_id",
                    reason: "\(prefix)api.key_id, \(prefix)api.issuer_id and \(prefix)api.private_key_file go together")
            }
            guard purpose == .worker else { return app }
            // Files are read only by the worker: the tools never call Apple.
            if let path = settings["shared_secret_file"] {
                app.sharedSecret = try read(prefix + "shared_secret_file", path)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            }
            if let path = settings["api.private_key_file"] {
                app.apiPrivateKeyPEM = try read(prefix + "api.private_key_file", path)
            }
            return app
        }
    }

    /// `apps.NAME.FIELD=value`: NAME checked, FIELD known, the value of the right kind.
    private static func appSetting(
        _ key: String, _ value: String, into apps: inout [String: AppSettings], purpose: Purpose
    )
        throws
    {
        let rest = key.dropFirst("apps.".count)
        guard let dot = rest.firstIndex(of: ".") else {
            throw ConfigurationError(
                key: key, reason: "unknown key: apps.NAME.FIELD, FIELD one of \(appKeys.joined(separator: ", "))")
        }
        let name = String(rest[..<dot])
        let field = String(rest[rest.index(after: dot)...])
        guard !name.isEmpty, name.count <= 32,
            name.utf8.allSatisfy({ byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || byte == UInt8(ascii: "_")
            })
        else {
            throw ConfigurationError(key: key, reason: "the app's name must be 1 to 32 of a-z, 0-9 and _")
        }
        guard name != "default" else {
            throw ConfigurationError(key: key, reason: "default is the app of apple.*: give this app another name")
        }
        guard appKeys.contains(field) else {
            let known = appKeys.map { "apps.\(name).\($0)" }
            let near = known.map { ($0, editDistance(key, $0)) }.min { $0.1 < $1.1 }
            let hint = near.flatMap { $0.1 <= 2 ? "; did you mean \($0.0)?" : nil } ?? ""
            throw ConfigurationError(key: key, reason: "unknown key" + hint)
        }
        switch field {
        case "bundle_id": _ = try nonEmpty(key, value)
        case "allow_sandbox":
            guard ["true", "false"].contains(value.lowercased()) else {
                throw ConfigurationError(key: key, reason: "must be true or false")
            }
        case "app_apple_id": _ = try appAppleID(key, value)
        case "api.key_id", "api.issuer_id": _ = try nonEmpty(key, value)
        default: break
        }
        apps[name, default: AppSettings()].settings[field] = field == "allow_sandbox" ? value.lowercased() : value
    }

    /// Every app's bundle id is its own, and each can take notifications when the receiver listens.
    private static func checkApps(_ configuration: WorkerConfiguration, purpose: Purpose) throws {
        guard purpose == .worker else { return }
        var owners: [[UInt8]: String] = [Array(configuration.apple.bundleID.utf8): "the default app (apple.bundle_id)"]
        for app in configuration.apps {
            if let owner = owners[Array(app.bundleID.utf8)] {
                throw ConfigurationError(
                    key: "apps.\(app.name).bundle_id", reason: "\(app.bundleID) is already the bundle id of \(owner)")
            }
            owners[Array(app.bundleID.utf8)] = "app \(app.name)"
            if configuration.notificationsListen != nil && app.appAppleID == nil {
                throw ConfigurationError(
                    key: "apps.\(app.name).app_apple_id",
                    reason: "is required with notifications.listen: Production notifications must name this app")
            }
        }
    }

    private static func appAppleID(_ key: String, _ value: String) throws -> Int64 {
        guard let id = Int64(value), id > 0 else {
            throw ConfigurationError(key: key, reason: "must be the app's numeric Apple id (a positive integer)")
        }
        return id
    }

    /// `host:port` with an IPv4 host, `localhost`, or none (every interface).
    private static func listenAddress(_ key: String, _ value: String) throws -> ListenAddress {
        guard let address = ListenAddress(value) else {
            throw ConfigurationError(
                key: key, reason: "must be host:port with an IPv4 host (0.0.0.0:9100, 127.0.0.1:9100, :9100)")
        }
        return address
    }

    private static func ledgerURL(_ key: String, _ value: String) throws -> String {
        guard value.hasPrefix("sqlite:") || value.hasPrefix("postgresql://") || value.hasPrefix("postgres://") else {
            throw ConfigurationError(key: key, reason: "must start with sqlite: or postgresql://")
        }
        return value
    }

    private static func nonEmpty(_ key: String, _ value: String) throws -> String {
        guard !value.isEmpty else { throw ConfigurationError(key: key, reason: "must not be empty") }
        return value
    }

    private static func read(_ key: String, _ path: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigurationError(key: key, reason: "cannot read \(path)")
        }
        return text
    }

    private static func readable(_ key: String, _ path: String) throws -> String {
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw ConfigurationError(key: key, reason: "cannot read \(path)")
        }
        return path
    }
}
