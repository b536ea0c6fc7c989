import AppleVerification
public import Foundation
import Kafka
import LedgerDomain
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

    /// Every key `build` accepts besides `kafka.*` (and the two `kafka.*` keys every deployment sets), each
    /// component's (ConfigurationKeys.swift). config/worker.properties shows each one; a test holds the two
    /// together.
    public static let documentedKeys = ConfigurationKeys.all.map(\.name) + appKeys.map { "apps.NAME.\($0)" }

    /// The keys of each further app, after `apps.NAME.` (docs/contract.md, sections 7 and 10).
    static let appKeys = AppSettings.fields

    public static func load(
        file: String?, overrides: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
        purpose: Purpose = .worker
    ) throws -> WorkerConfiguration {
        try loadWithSources(file: file, overrides: overrides, environment: environment, purpose: purpose).configuration
    }

    /// ``load(file:overrides:environment:purpose:)``, keeping each key's winning value and where it came from
    /// (for `check-config --print`). An error about a key names its source and, unless it is a secret, its
    /// value: `worker.max_in_flight=lots (from worker.properties:12): must be an integer ...`.
    /// `readsFiles`: false reads none of the files the keys name (`check-config --no-files`); `everyProblem`: every
    /// problem found is thrown together (``ConfigurationProblems``), not the first alone.
    public static func loadWithSources(
        file: String?, overrides: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
        purpose: Purpose = .worker, readsFiles: Bool = true, everyProblem: Bool = false
    ) throws -> LoadedConfiguration {
        // OpenTelemetry's own variables are the weakest source (OpenTelemetryEnvironment says which win).
        let openTelemetry = OpenTelemetryEnvironment.settings(environment)
        var settings: [LoadedConfiguration.Setting] = openTelemetry.weakest.map {
            .init(key: $0.key, value: $0.value, source: .environment($0.variable))
        }
        if let file {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw ConfigurationError(.unreadableFile, key: "--config", reason: "cannot read \(file)")
            }
            settings += try numberedProperties(text: text, source: file).map {
                .init(key: $0.key, value: $0.value, source: .file(path: file, line: $0.line))
            }
        }
        for (variable, value) in environment.sorted(by: { $0.key < $1.key }) where isKeyVariable(variable) {
            settings.append(
                .init(key: key(forEnvironmentVariable: variable), value: value, source: .environment(variable)))
        }
        settings += openTelemetry.turnOff.map { .init(key: $0.key, value: $0.value, source: .environment($0.variable)) }
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
        // One key however it is spelled (apps.default.bundle_id is apple.bundle_id); later sources win: only each
        // key's last value is validated (a bad value overridden is no error).
        try refuseTwoSpellings(settings)
        settings = settings.map { .init(key: AppSettings.canonical($0.key), value: $0.value, source: $0.source) }
        var seen: Set<String> = []
        settings = settings.reversed().filter { seen.insert($0.key).inserted }.reversed()
        let refused = OpenTelemetryEnvironment.withoutRefused(settings)
        settings = refused.kept
        var built = building(
            settings.map { ($0.key, $0.value) }, purpose: purpose, readsFiles: readsFiles, everyProblem: everyProblem)
        built.configuration.tracing.ignored = openTelemetry.ignored + refused.ignored
        let problems = built.problems.map { sourced($0, settings) }
        if everyProblem, !problems.isEmpty { throw ConfigurationProblems(problems) }
        if let first = problems.first { throw first }
        return LoadedConfiguration(configuration: built.configuration, settings: settings)
    }

    /// `error` with the value (unless a secret's) and the source of the setting it names.
    private static func sourced(_ error: ConfigurationError, _ settings: [LoadedConfiguration.Setting])
        -> ConfigurationError
    {
        guard let setting = settings.last(where: { $0.key == error.key }) else { return error }
        var error = error
        // An unknown key is a known one mistyped, as often a secret's (ledger.uri for ledger.url with its
        // password, desk.session_key for desk.session_key_file): its value is never shown, only its name.
        let hidden = error.code == .unknownKey
        error.value = hidden ? nil : printable(setting.key, setting.value).map(displayed)
        error.source = setting.source.description
        return error
    }

    /// The environment, or `--set`, naming one key by both its spellings (`apple.X` and `apps.default.X`): which
    /// one wins would be an accident of sorting or order, so neither does (a file's two lines are refused as a key
    /// set twice).
    private static func refuseTwoSpellings(_ settings: [LoadedConfiguration.Setting]) throws {
        var seen: [String: LoadedConfiguration.Setting] = [:]
        for setting in settings {
            let key = AppSettings.canonical(setting.key)
            let group: String
            switch setting.source {
            case .file: continue
            case .environment: group = "environment"
            case .commandLine: group = "--set"
            }
            if let first = seen[group + key], first.key != setting.key {
                throw ConfigurationError(
                    .conflictingKeys, key: setting.key,
                    reason: "\(first.source.description == "--set" ? first.key : first.source.description) names "
                        + "the same key (\(key)): set one of them")
            }
            seen[group + key] = setting
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
        // libpq's key=value form (`host=db password=...`), or a user's part that is not a URL's: not shown.
        if key == "ledger.url" && (value.lowercased().contains("password") || value.contains("@")) { return nil }
        if key == "otel.headers" { return nil }  // an API key for the collector, often
        // A collector's URL may carry a user and password, or a key in its query.
        if key == "otel.endpoint" && (value.contains("?") || value.contains("@")) { return nil }
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
            // Two lines for one key (or its two spellings): one of them is a mistake, and which one wins is not
            // obvious.
            if let first = lines[AppSettings.canonical(key)] {
                throw ConfigurationError(
                    key: "\(source):\(number + 1)", reason: "\(key) is already set at line \(first)")
            }
            lines[AppSettings.canonical(key)] = number + 1
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

    static func editDistance(_ left: String, _ right: String) -> Int {
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

    /// The configuration of `properties` (each key once, its winning value): each key read by its component,
    /// then each component's checks across keys.
    package static func build(_ properties: [(key: String, value: String)], purpose: Purpose = .worker) throws
        -> WorkerConfiguration
    {
        let built = building(properties, purpose: purpose, readsFiles: true, everyProblem: false)
        if let first = built.problems.first { throw first }
        return built.configuration
    }

    /// The configuration `properties` make, with its problems: the first alone (start-up stops there), or every
    /// one (`check-config`: each key's own, then each check's, skipping what a key's problem already explains).
    static func building(
        _ properties: [(key: String, value: String)], purpose: Purpose, readsFiles: Bool, everyProblem: Bool
    ) -> (configuration: WorkerConfiguration, problems: [ConfigurationError]) {
        var draft = ConfigurationDraft(purpose: purpose, readsFiles: readsFiles)
        var problems: [ConfigurationError] = []
        func note(_ error: any Error) {
            if let error = error as? ConfigurationError {
                if !problems.contains(where: { $0.key == error.key }) { problems.append(error) }
            } else {
                problems.append(ConfigurationError(key: "configuration", reason: "\(error)"))
            }
        }
        for (key, text) in properties {
            var value = ConfigurationValue(key: key, text: text)
            value.readsFiles = readsFiles
            do {
                if let known = ConfigurationKeys.byName[key] {
                    try known.read(value, &draft)
                } else if try !AppSettings.read(value, &draft), try !ConfigurationKeys.kafkaProperty(value, &draft) {
                    throw ConfigurationError(.unknownKey, key: key, reason: "unknown key" + suggestion(for: key))
                }
            } catch {
                note(error)
                if !everyProblem { return (draft.configuration, problems) }
            }
        }
        for check in ConfigurationKeys.checks {
            do {
                try check(&draft)
            } catch {
                note(error)
                if !everyProblem { break }
            }
        }
        return (draft.configuration, problems)
    }
}

/// Every problem of a configuration, as `check-config` reports them: one line each.
public struct ConfigurationProblems: Error, Sendable, CustomStringConvertible {
    public let problems: [ConfigurationError]

    init(_ problems: [ConfigurationError]) { self.problems = problems }

    public var description: String { problems.map(\.description).joined(separator: "\n") }
}
