import Foundation

/// OpenTelemetry's standard environment variables (the specification's "SDK environment variables" and the OTLP
/// exporter's), read as the `otel.*` keys they mean, so a cluster that configures every service's tracing the same
/// way configures the worker too. They are the weakest source: the file, `RECEIPT_WORKER_*` variables and `--set`
/// win over them, except `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_EXPORTER=none`, which turn tracing off over
/// anything but `--set`. A `TRACES_` variable wins over its general one; an empty value is unset. A value the
/// worker cannot honour (a sampler other than the six standard ones, a protocol other than `http/protobuf`) stops
/// start-up naming the variable, as a bad key does.
enum OpenTelemetryEnvironment {
    /// One setting read from a variable.
    struct Setting: Equatable {
        let key: String
        let value: String
        let variable: String
    }

    /// The settings the variables make: `weakest` go before every other source, `turnOff` after the environment.
    static func settings(_ environment: [String: String]) throws -> (weakest: [Setting], turnOff: [Setting]) {
        func value(_ name: String) -> (name: String, value: String)? {
            guard let text = environment[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
            return (name, text)
        }
        /// The signal's own variable, else the general one.
        func exporter(_ suffix: String) -> (name: String, value: String)? {
            value("OTEL_EXPORTER_OTLP_TRACES_" + suffix) ?? value("OTEL_EXPORTER_OTLP_" + suffix)
        }
        var weakest: [Setting] = []
        func set(_ key: String, _ found: (name: String, value: String)?) {
            if let found { weakest.append(Setting(key: key, value: found.value, variable: found.name)) }
        }
        if let endpoint = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            set("otel.endpoint", endpoint)
        } else if let base = value("OTEL_EXPORTER_OTLP_ENDPOINT") {
            // A base URL: traces go to its path `v1/traces`.
            let slash = base.value.hasSuffix("/") ? "" : "/"
            set("otel.endpoint", (base.name, base.value + slash + "v1/traces"))
        }
        set("otel.headers", exporter("HEADERS"))
        set("otel.timeout_ms", exporter("TIMEOUT"))
        set("otel.compression", exporter("COMPRESSION").map { ($0.name, $0.value.lowercased()) })
        if let protocolName = exporter("PROTOCOL"), protocolName.value.lowercased() != "http/protobuf" {
            throw ConfigurationError(
                key: protocolName.name, reason: "must be http/protobuf: the worker exports OTLP over HTTP in protobuf")
        }
        set("otel.service_name", value("OTEL_SERVICE_NAME"))
        set("otel.resource_attributes", value("OTEL_RESOURCE_ATTRIBUTES"))
        set("otel.export_interval_ms", value("OTEL_BSP_SCHEDULE_DELAY"))
        set("otel.max_queued_spans", value("OTEL_BSP_MAX_QUEUE_SIZE"))
        set("otel.max_export_batch_size", value("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"))
        if let sampler = value("OTEL_TRACES_SAMPLER") {
            set("otel.sample_ratio", try sampleRatio(sampler, argument: value("OTEL_TRACES_SAMPLER_ARG")))
        }
        var turnOff: [Setting] = []
        if let disabled = value("OTEL_SDK_DISABLED"), disabled.value.lowercased() == "true" {
            turnOff.append(Setting(key: "otel.endpoint", value: "", variable: disabled.name))
        }
        if let exporters = value("OTEL_TRACES_EXPORTER") {
            let names = exporters.value.lowercased().split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            if names == ["none"] {
                turnOff.append(Setting(key: "otel.endpoint", value: "", variable: exporters.name))
            } else if names != ["otlp"] {
                throw ConfigurationError(key: exporters.name, reason: "must be otlp or none")
            }
        }
        return (weakest, turnOff)
    }

    /// The worker's sampler is always parent-based (a message's sampled flag is kept); a root is sampled at
    /// `otel.sample_ratio`. `always_on` and `traceidratio` are read as their parent-based forms.
    private static func sampleRatio(_ sampler: (name: String, value: String), argument: (name: String, value: String)?)
        throws -> (name: String, value: String)
    {
        switch sampler.value.lowercased() {
        case "always_on", "parentbased_always_on": return (sampler.name, "1")
        case "always_off", "parentbased_always_off": return (sampler.name, "0")
        case "traceidratio", "parentbased_traceidratio": return argument ?? (sampler.name, "1")
        default:
            throw ConfigurationError(
                key: sampler.name,
                reason:
                    "must be one of always_on, always_off, traceidratio and their parentbased_ forms (the worker's sampler is parent-based)"
            )
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
            if headerNames && (!isToken || control) {
                throw invalid("must be header names with values free of control characters")
            }
            return (name, decoded.trimmingCharacters(in: .whitespaces))
        }
    }
}
