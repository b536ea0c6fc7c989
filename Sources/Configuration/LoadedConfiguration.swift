import Kafka

/// A configuration with each key's winning value and its source: what `check-config --print` shows.
public struct LoadedConfiguration: Sendable {
    /// Where a key's value came from.
    public enum Source: Sendable, Equatable, CustomStringConvertible {
        case file(path: String, line: Int)
        case environment(String)
        case commandLine

        public var description: String {
            switch self {
            case .file(let path, let line): "\(path):\(line)"
            case .environment(let variable): variable
            case .commandLine: "--set"
            }
        }
    }

    public struct Setting: Sendable {
        public let key: String
        public let value: String
        public let source: Source
    }

    public let configuration: WorkerConfiguration
    /// The keys set by a file, the environment or `--set`, each once (its winning value), in that order.
    public let settings: [Setting]

    /// The configuration as a properties file that `--config` reads back to the same configuration: the keys
    /// set, grouped by source; every other documented key at its default (commented when it has none); and,
    /// for reference, the librdkafka settings the worker passes, its own included. Secrets are never
    /// printed: their lines are commented out, to be set again (or kept in their `*_file` keys).
    public func propertiesText() -> String {
        var lines = [
            "# The configuration in effect (receipt-worker check-config --print). Read back with --config; a",
            "# secret's line is commented out and must be set again.",
        ]
        func line(_ key: String, _ value: String) -> String {
            if ConfigurationLoader.printable(key, value) != nil { return "\(key)=\(value)" }
            let masked = key == "ledger.url" ? WorkerConfiguration.withoutPassword(value) : "<set>"
            return "# \(key)=\(masked) (a secret: not printed; set it again)"
        }
        let groups: [(title: String, settings: [Setting])] = [
            ("from the file", settings.filter { if case .file = $0.source { true } else { false } }),
            ("from the environment", settings.filter { if case .environment = $0.source { true } else { false } }),
            ("from --set", settings.filter { $0.source == .commandLine }),
        ]
        for (title, group) in groups where !group.isEmpty {
            let origin =
                group.first.flatMap { if case .file(let path, _) = $0.source { " \(path)" } else { nil } } ?? ""
            lines += ["", "# ---- \(title)\(origin) ----"] + group.map { line($0.key, $0.value) }
        }
        let set = Set(settings.map(\.key))
        lines += ["", "# ---- defaults ----"]
        for key in ConfigurationLoader.documentedKeys where !set.contains(key) && !key.hasPrefix("apps.NAME.") {
            if let alternative = WorkerConfiguration.alternatives[key], set.contains(alternative) {
                lines.append("# \(key): from \(alternative)")
            } else if let value = ConfigurationKeys.byName[key]?.defaultValue {
                lines.append("\(key)=\(value)")
            } else {
                lines.append("# \(key)=  (not set)")
            }
        }
        lines.append(
            "# apps.NAME.{\(ConfigurationLoader.appKeys.joined(separator: ","))}: another app (none has a default)")
        if let (consumer, producer) = try? configuration.kafkaClients() {
            for (client, properties) in [
                ("consumer", try? consumer.effectiveProperties()), ("producer", try? producer.effectiveProperties()),
            ] {
                lines += ["", "# ---- what librdkafka's \(client) is given (for reference; kafka.KEY sets KEY) ----"]
                for (key, value) in properties ?? [] {
                    let shown = KafkaError.isSensitiveProperty(key) ? "<set>" : value
                    lines.append("# \(key)=\(shown)")
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
