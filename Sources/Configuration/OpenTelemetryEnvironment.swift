import Foundation

/// OpenTelemetry's standard environment variables (the specification's "SDK environment variables" and the OTLP
/// exporter's), read as the `otel.*` keys they mean, so a cluster that configures every service's tracing the same
/// way configures the worker too. They are the weakest source: the file, `RECEIPT_WORKER_*` variables and `--set`
/// win over them, except `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_EXPORTER=none`, which turn tracing off over
/// anything but `--set` (and then no other `OTEL_*` variable is read). A `TRACES_` variable wins over its general
/// one; an empty value is unset. As the specification asks, a value the worker cannot use is ignored with a warning
/// (logged at start, printed by `check-config`), never a stop: these variables are often set for every service of a
/// cluster, and a sampler or a protocol meant for another must not keep the worker, or its tools, from starting.
enum OpenTelemetryEnvironment {
    /// One setting read from a variable.
    struct Setting: Equatable {
        let key: String
        let value: String
        let variable: String
    }

    /// What the variables make: `weakest` go before every other source, `turnOff` after the environment;
    /// `ignored` says what was not used, and why (never a value: a header may hold a key).
    struct Reading: Equatable {
        var weakest: [Setting] = []
        var turnOff: [Setting] = []
        var ignored: [String] = []
    }

    static func settings(_ environment: [String: String]) -> Reading {
        func value(_ name: String) -> (name: String, value: String)? {
            guard let text = environment[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty
            else { return nil }
            return (name, text)
        }
        /// The signal's own variable, else the general one.
        func exporter(_ suffix: String) -> (name: String, value: String)? {
            value("OTEL_EXPORTER_OTLP_TRACES_" + suffix) ?? value("OTEL_EXPORTER_OTLP_" + suffix)
        }
        var reading = Reading()
        // Off first: then nothing else is read, so nothing else can be in the way.
        if let disabled = value("OTEL_SDK_DISABLED"), disabled.value.lowercased() == "true" {
            reading.turnOff.append(Setting(key: "otel.endpoint", value: "", variable: disabled.name))
            return reading
        }
        let exporters = value("OTEL_TRACES_EXPORTER")
        let exporterNames = exporters.map {
            $0.value.lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        if let exporters, exporterNames == ["none"] {
            reading.turnOff.append(Setting(key: "otel.endpoint", value: "", variable: exporters.name))
            return reading
        }
        func set(_ key: String, _ found: (name: String, value: String)?) {
            if let found { reading.weakest.append(Setting(key: key, value: found.value, variable: found.name)) }
        }
        var exportsOTLP = true
        if let exporters, exporterNames != ["otlp"] {
            reading.ignored.append("\(exporters.name): the worker exports traces over OTLP only (otlp or none)")
            exportsOTLP = false
        }
        if let protocolName = exporter("PROTOCOL"), protocolName.value.lowercased() != "http/protobuf" {
            reading.ignored.append(
                "\(protocolName.name): the worker exports OTLP over HTTP in protobuf only (http/protobuf)")
            exportsOTLP = false
        }
        if exportsOTLP {
            if let endpoint = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
                set("otel.endpoint", endpoint)
            } else if let base = value("OTEL_EXPORTER_OTLP_ENDPOINT") {
                set("otel.endpoint", (base.name, tracesURL(base: base.value)))
            }
        } else if value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") ?? value("OTEL_EXPORTER_OTLP_ENDPOINT") != nil {
            reading.ignored.append("OpenTelemetry's endpoint variables: not used, as said above")
        }
        set("otel.headers", exporter("HEADERS"))
        set("otel.timeout_ms", exporter("TIMEOUT"))
        set("otel.compression", exporter("COMPRESSION").map { ($0.name, $0.value.lowercased()) })
        set("otel.service_name", value("OTEL_SERVICE_NAME"))
        set("otel.resource_attributes", value("OTEL_RESOURCE_ATTRIBUTES"))
        set("otel.export_interval_ms", value("OTEL_BSP_SCHEDULE_DELAY"))
        set("otel.max_queued_spans", value("OTEL_BSP_MAX_QUEUE_SIZE"))
        set("otel.max_export_batch_size", value("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"))
        if let sampler = value("OTEL_TRACES_SAMPLER") {
            if let ratio = sampleRatio(sampler, argument: value("OTEL_TRACES_SAMPLER_ARG")) {
                set("otel.sample_ratio", ratio)
            } else {
                reading.ignored.append(
                    "\(sampler.name): the worker's sampler is parent-based; it reads always_on, always_off, traceidratio and their parentbased_ forms"
                )
            }
        }
        return reading
    }

    /// The winning settings without those an OpenTelemetry variable set to a value its key refuses: each ignored, said
    /// as a warning (never its value).
    static func withoutRefused(_ settings: [LoadedConfiguration.Setting]) -> (
        kept: [LoadedConfiguration.Setting], ignored: [String]
    ) {
        var ignored: [String] = []
        let kept = settings.filter { setting in
            guard case .environment(let variable) = setting.source, variable.hasPrefix("OTEL_"),
                let problem = problem(setting.key, setting.value)
            else { return true }
            ignored.append("\(variable): \(problem.reason) (\(setting.key)); its default is used")
            return false
        }
        return (kept, ignored)
    }

    /// What the key would refuse in `value` alone, or nil.
    static func problem(_ key: String, _ value: String) -> ConfigurationError? {
        guard let known = ConfigurationKeys.byName[key] else { return nil }
        var draft = ConfigurationDraft(purpose: .worker, readsFiles: false)
        do {
            try known.read(ConfigurationValue(key: key, text: value), &draft)
            return nil
        } catch {
            return error as? ConfigurationError ?? ConfigurationError(key: key, reason: "\(error)")
        }
    }

    /// A base URL's traces URL: `v1/traces` added to its path (before a query, if it has one).
    static func tracesURL(base: String) -> String {
        let query = base.firstIndex(of: "?")
        let path = query.map { String(base[..<$0]) } ?? base
        let slash = path.hasSuffix("/") ? "" : "/"
        return path + slash + "v1/traces" + (query.map { String(base[$0...]) } ?? "")
    }

    /// The worker's sampler is always parent-based (a message's sampled flag is kept); a root is sampled at
    /// `otel.sample_ratio`. `always_on` and `traceidratio` are read as their parent-based forms. Nil: not one of these.
    private static func sampleRatio(_ sampler: (name: String, value: String), argument: (name: String, value: String)?)
        -> (name: String, value: String)?
    {
        switch sampler.value.lowercased() {
        case "always_on", "parentbased_always_on": (sampler.name, "1")
        case "always_off", "parentbased_always_off": (sampler.name, "0")
        case "traceidratio", "parentbased_traceidratio": argument ?? (sampler.name, "1")
        default: nil
        }
    }
}

extension ConfigurationValue {
    /// OpenTelemetry's list of pairs (`key1=value1,key2=value2`, as `OTEL_EXPORTER_OTLP_HEADERS` and
    /// `OTEL_RESOURCE_ATTRIBUTES` write them): keys trimmed, values percent-decoded and trimmed; empty: none.
    /// `headerNames`: each key an HTTP header name (a token) and each value without control characters, so no value
    /// can add a header of its own. At most 64 pairs of 4 KiB.
    func pairs(headerNames: Bool) throws -> [(String, String)] {
        guard !text.isEmpty else { return [] }
        let items = text.split(separator: ",", omittingEmptySubsequences: true)
        guard items.count <= 64 else { throw invalid("must have at most 64 pairs") }
        return try items.map { item in
            guard let equals = item.firstIndex(of: "=") else {
                throw invalid("must be key=value pairs joined by commas")
            }
            let name = item[..<equals].trimmingCharacters(in: .whitespaces)
            let encoded = item[item.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard let decoded = encoded.removingPercentEncoding, !name.isEmpty, name.utf8.count <= 256,
                decoded.utf8.count <= 4_096
            else { throw invalid("must be key=value pairs joined by commas, values percent-encoded") }
            let tokenBytes = Set("!#$%&'*+-.^_`|~".utf8)
            let isToken = name.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || tokenBytes.contains(byte)
            }
            let control = decoded.unicodeScalars.contains { $0.properties.generalCategory == .control }
            if headerNames && (!isToken || control || decoded.trimmingCharacters(in: .whitespaces).isEmpty) {
                throw invalid("must be header names with values, free of control characters")
            }
            // What the exporter itself says of its body and connection is not a configured header's to change.
            let reserved = [
                "content-type", "content-encoding", "content-length", "host", "transfer-encoding",
                "connection", "expect",
            ]
            if headerNames && reserved.contains(name.lowercased()) {
                throw invalid("must not set \(name): the exporter sets it")
            }
            return (name, decoded.trimmingCharacters(in: .whitespaces))
        }
    }
}
