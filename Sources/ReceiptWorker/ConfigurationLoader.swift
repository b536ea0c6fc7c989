import AppleVerification
import Foundation

/// Reads `key=value` properties (`#` and `!` start comments) and `--set key=value` overrides into a
/// ``WorkerConfiguration``. Unknown keys, bad values and unreadable files stop start-up with the key's name.
public enum ConfigurationLoader {
    public static func load(file: String?, overrides: [String]) throws -> WorkerConfiguration {
        var properties: [(key: String, value: String)] = []
        if let file {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw ConfigurationError(key: "--config", reason: "cannot read \(file)")
            }
            for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = rawLine.trimmingCharacters(in: .whitespaces)
                if line.isEmpty || line.hasPrefix("#") || line.hasPrefix("!") { continue }
                guard let equals = line.firstIndex(of: "=") else {
                    throw ConfigurationError(key: "\(file):\(number + 1)", reason: "expected key=value")
                }
                properties.append((line[..<equals].trimmingCharacters(in: .whitespaces),
                                   line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)))
            }
        }
        for override in overrides {
            guard let equals = override.firstIndex(of: "=") else {
                throw ConfigurationError(key: "--set", reason: "expected key=value")
            }
            properties.append((String(override[..<equals]), String(override[override.index(after: equals)...])))
        }
        return try build(properties)
    }

    static func build(_ properties: [(key: String, value: String)]) throws -> WorkerConfiguration {
        var configuration = WorkerConfiguration()
        var sharedSecretFile: String?
        var rootFiles: [String]?
        for (key, value) in properties {
            func integer(_ range: ClosedRange<Int>) throws -> Int {
                guard let number = Int(value), range.contains(number) else {
                    throw ConfigurationError(key: key, reason: "must be an integer from \(range.lowerBound) to \(range.upperBound)")
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
            case "jobs.max_bytes": configuration.jobsMaxBytes = try integer(1_024...10_485_760)
            case "apple.bundle_id": configuration.apple.bundleID = try nonEmpty(key, value)
            case "apple.allow_sandbox": configuration.apple.allowSandbox = try boolean()
            case "apple.verify_receipt.production_url": configuration.apple.verifyReceiptProductionURL = try url()
            case "apple.verify_receipt.sandbox_url": configuration.apple.verifyReceiptSandboxURL = try url()
            case "apple.shared_secret": configuration.apple.sharedSecret = value.isEmpty ? nil : value
            case "apple.shared_secret_file": sharedSecretFile = value
            case "apple.api.production_url": configuration.apple.apiProductionURL = try url()
            case "apple.api.sandbox_url": configuration.apple.apiSandboxURL = try url()
            case "apple.api.key_id": configuration.apple.apiKeyID = try nonEmpty(key, value)
            case "apple.api.issuer_id": configuration.apple.apiIssuerID = try nonEmpty(key, value)
            case "apple.api.private_key_file": configuration.apple.apiPrivateKeyPEM = try read(key, value)
            case "apple.root_certificates": rootFiles = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            case "ledger.url":
                guard value.hasPrefix("sqlite:") || value.hasPrefix("postgresql://") || value.hasPrefix("postgres://") else {
                    throw ConfigurationError(key: key, reason: "must start with sqlite: or postgresql://")
                }
                configuration.ledgerURL = value
            case "worker.max_in_flight": configuration.maxInFlight = try integer(1...100_000)
            case "worker.drain_timeout_ms": configuration.drainTimeout = .milliseconds(try integer(0...600_000))
            case "retry.max_attempts": configuration.retry.maxAttempts = try integer(1...100)
            case "retry.initial_backoff_ms": configuration.retry.initialBackoff = .milliseconds(try integer(1...600_000))
            case "retry.max_backoff_ms": configuration.retry.maxBackoff = .milliseconds(try integer(1...3_600_000))
            case "http.timeout_ms": configuration.httpTimeout = .milliseconds(try integer(100...600_000))
            case "http.ca_file": configuration.httpCAFile = try readable(key, value)
            case "events.source": configuration.eventSource = try nonEmpty(key, value)
            case "metrics.listen":
                guard let colon = value.lastIndex(of: ":"), UInt16(value[value.index(after: colon)...]) != nil else {
                    throw ConfigurationError(key: key, reason: "must be host:port")
                }
                configuration.metricsListen = value
            case _ where key.hasPrefix("kafka.") && key.count > 6:
                configuration.kafka[String(key.dropFirst(6))] = value
            default:
                throw ConfigurationError(key: key, reason: "unknown key")
            }
        }
        if let sharedSecretFile {
            configuration.apple.sharedSecret = try read("apple.shared_secret_file", sharedSecretFile)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if let rootFiles {
            configuration.apple.rootCertificates = try rootFiles.map { path in
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw ConfigurationError(key: "apple.root_certificates", reason: "cannot read \(path)")
                }
                return data
            }
        } else {
            configuration.apple.rootCertificates = [AppleRootCertificates.appleRootCAG3]
        }
        guard !configuration.apple.bundleID.isEmpty else {
            throw ConfigurationError(key: "apple.bundle_id", reason: "is required")
        }
        if configuration.retry.initialBackoff > configuration.retry.maxBackoff {
            throw ConfigurationError(key: "retry.initial_backoff_ms", reason: "must not exceed retry.max_backoff_ms")
        }
        let api = [configuration.apple.apiKeyID, configuration.apple.apiIssuerID, configuration.apple.apiPrivateKeyPEM]
        if api.contains(where: { $0 != nil }) && api.contains(where: { $0 == nil }) {
            throw ConfigurationError(
                key: "apple.api.key_id", reason: "apple.api.key_id, apple.api.issuer_id and apple.api.private_key_file go together")
        }
        return configuration
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
