import Foundation
import Testing

@testable import Configuration
@testable import ReceiptWorker

/// OpenTelemetry's standard variables as the worker reads them: what each sets, which source wins, what is refused.
@Suite struct OpenTelemetryEnvironmentTests {
    static let required = ["apple.bundle_id=com.example.game"]

    func tracing(_ environment: [String: String], file: String? = nil, set: [String] = []) throws
        -> WorkerConfiguration.Tracing
    {
        try ConfigurationLoader.load(file: file, overrides: Self.required + set, environment: environment).tracing
    }

    func refusal(_ environment: [String: String]) -> ConfigurationError? {
        do {
            _ = try tracing(environment)
            return nil
        } catch {
            return error as? ConfigurationError
        }
    }

    @Test("the general endpoint is a base URL (v1/traces added); the traces endpoint is used as it is and wins")
    func endpoints() throws {
        #expect(
            try tracing(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]).endpoint
                == "http://collector:4318/v1/traces")
        #expect(
            try tracing(["OTEL_EXPORTER_OTLP_ENDPOINT": "https://c.example/otlp/"]).endpoint
                == "https://c.example/otlp/v1/traces")
        #expect(
            try tracing([
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/t",
            ]).endpoint == "http://b:4318/t")
        #expect(try tracing(["OTEL_EXPORTER_OTLP_ENDPOINT": ""]).endpoint == nil, "empty is unset")
        #expect(try tracing([:]).endpoint == nil, "off by default")
    }

    @Test("the worker's own keys win over OpenTelemetry's variables; turning tracing off wins over all but --set")
    func precedence() throws {
        let environment = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://otel:4318/v1/traces"]
        #expect(
            try tracing(environment.merging(["RECEIPT_WORKER_OTEL__ENDPOINT": "http://ours:4318/v1/traces"]) { $1 })
                .endpoint == "http://ours:4318/v1/traces")
        #expect(
            try tracing(environment, set: ["otel.endpoint=http://set:4318/v1/traces"]).endpoint
                == "http://set:4318/v1/traces")
        let on = ["RECEIPT_WORKER_OTEL__ENDPOINT": "http://ours:4318/v1/traces"]
        #expect(try tracing(on.merging(["OTEL_SDK_DISABLED": "TRUE"]) { $1 }).endpoint == nil)
        #expect(try tracing(on.merging(["OTEL_SDK_DISABLED": "false"]) { $1 }).endpoint != nil)
        #expect(try tracing(on.merging(["OTEL_TRACES_EXPORTER": "none"]) { $1 }).endpoint == nil)
        #expect(
            try tracing(on.merging(["OTEL_SDK_DISABLED": "true"]) { $1 }, set: ["otel.endpoint=http://x/v1/traces"])
                .endpoint == "http://x/v1/traces")
    }

    @Test("samplers: the six standard ones as a ratio of roots; any other ignored with a warning, never a stop")
    func samplers() throws {
        #expect(try tracing(["OTEL_TRACES_SAMPLER": "always_off"]).sampleRatio == 0)
        #expect(try tracing(["OTEL_TRACES_SAMPLER": "parentbased_always_on"]).sampleRatio == 1)
        #expect(
            try tracing(["OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"])
                .sampleRatio == 0.25)
        #expect(try tracing(["OTEL_TRACES_SAMPLER": "traceidratio"]).sampleRatio == 1)
        #expect(try tracing(["OTEL_TRACES_SAMPLER_ARG": "0.5"]).sampleRatio == 1, "the argument alone is unused")
        let remote = try tracing(["OTEL_TRACES_SAMPLER": "jaeger_remote"])
        #expect(remote.sampleRatio == 1 && remote.ignored.contains { $0.hasPrefix("OTEL_TRACES_SAMPLER:") })
        let outside = try tracing(["OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"])
        #expect(outside.sampleRatio == 1 && outside.ignored.contains { $0.hasPrefix("OTEL_TRACES_SAMPLER_ARG:") })
    }

    @Test("the exporter's settings: timeout, compression, batches; another protocol or exporter: its endpoint unused")
    func exporter() throws {
        let read = try tracing([
            "OTEL_EXPORTER_OTLP_TIMEOUT": "5000", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2000",
            "OTEL_EXPORTER_OTLP_COMPRESSION": "GZIP", "OTEL_BSP_SCHEDULE_DELAY": "300",
            "OTEL_BSP_MAX_QUEUE_SIZE": "4096",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "128", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        ])
        #expect(read.timeout == .milliseconds(2_000) && read.gzip)
        #expect(read.exportInterval == .milliseconds(300) && read.maxQueuedSpans == 4_096 && read.batchSize == 128)
        let endpoint = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"]
        for (variable, value) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
            ("OTEL_TRACES_EXPORTER", "zipkin"),
        ] {
            let other = try tracing(endpoint.merging([variable: value]) { $1 })
            #expect(other.endpoint == nil && other.ignored.contains { $0.hasPrefix(variable + ":") }, "\(variable)")
        }
        // Values the keys refuse (another SDK's minimum, seconds for milliseconds): ignored, the defaults kept.
        let foreign = try tracing([
            "OTEL_BSP_MAX_QUEUE_SIZE": "32", "OTEL_EXPORTER_OTLP_TIMEOUT": "10",
            "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd",
        ])
        #expect(foreign.maxQueuedSpans == 8_192 && foreign.timeout == .seconds(10) && !foreign.gzip)
        #expect(foreign.ignored.count == 3, "\(foreign.ignored)")
    }

    @Test("tracing turned off reads no other variable; the tools start whatever the variables say")
    func offAndTools() throws {
        let hostile = [
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_TRACES_SAMPLER": "xray", "OTEL_BSP_MAX_QUEUE_SIZE": "1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
        ]
        let off = try tracing(hostile.merging(["OTEL_SDK_DISABLED": "true\n"]) { $1 })
        #expect(off.endpoint == nil && off.ignored.isEmpty && off.maxQueuedSpans == 8_192)
        let tool = try ConfigurationLoader.load(file: nil, overrides: [], environment: hostile, purpose: .tool)
        #expect(tool.tracing.endpoint == nil && !tool.tracing.ignored.isEmpty)
    }

    @Test("a file's key wins over OpenTelemetry's variable; the variable fills what the file leaves")
    func fileWins() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("otel-\(UUID()).properties")
        try "otel.endpoint=http://from-file:4318/v1/traces\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let read = try tracing(
            ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://from-env:4318", "OTEL_SERVICE_NAME": "receipts-eu"], file: file.path
        )
        #expect(read.endpoint == "http://from-file:4318/v1/traces" && read.serviceName == "receipts-eu")
    }

    @Test(
        "headers and resource attributes: percent-decoded pairs; a header that would smuggle another ignored, unshown")
    func pairs() throws {
        let read = try tracing([
            "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%2Fecret%3D, x-team = games ",
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes,deployment.environment=prod%20eu",
        ])
        #expect(read.headers.map(\.0) == ["api-key", "x-team"] && read.headers.map(\.1) == ["s/ecret=", "games"])
        #expect(read.resourceAttributes.map(\.1) == ["from-attributes", "prod eu"])
        #expect(read.serviceName == nil, "OTEL_SERVICE_NAME unset: the exporter takes the attributes' name")
        #expect(try tracing(["OTEL_SERVICE_NAME": "receipts-eu"]).serviceName == "receipts-eu")
        for hostile in [
            "x-a=1%0D%0AX-Injected: 1", "bad name=1", "novalue", "x=%ZZ", "content-type=text/plain", "x-empty=",
        ] {
            let ignored = try tracing(["OTEL_EXPORTER_OTLP_HEADERS": hostile])
            #expect(ignored.headers.isEmpty, "\(hostile)")
            #expect(ignored.ignored.count == 1 && !ignored.ignored[0].contains("Injected"), "\(ignored.ignored)")
        }
        // The worker's own key refuses what the variable would be ignored for, naming the key, never the value.
        let refused = refusal(["RECEIPT_WORKER_OTEL__HEADERS": "x-a=secret%0D%0AX-Injected: 1"])
        #expect(refused?.key == "otel.headers" && refused?.value == nil)
        #expect(!"\(refused.map { "\($0)" } ?? "")".contains("secret"))
        let many = (0..<65).map { "x-\($0)=1" }.joined(separator: ",")
        #expect(refusal(["RECEIPT_WORKER_OTEL__HEADERS": many])?.key == "otel.headers")
    }

    @Test("a collector's URL with a password or a key in its query is never printed")
    func endpointMasked() {
        #expect(ConfigurationLoader.printable("otel.endpoint", "http://user:pw@c:4318/v1/traces") == nil)
        #expect(ConfigurationLoader.printable("otel.endpoint", "https://c/v1/traces?api_key=k") == nil)
        #expect(ConfigurationLoader.printable("otel.endpoint", "http://c:4318/v1/traces") != nil)
        #expect(OpenTelemetryEnvironment.tracesURL(base: "https://c/otlp?k=1") == "https://c/otlp/v1/traces?k=1")
    }

    @Test("a collector's answer: 2xx taken; 429, 502, 503, 504 and silence sent again; anything else never")
    func fates() {
        #expect(TraceExporter.fate(status: 200, retryAfter: nil) == .taken)
        #expect(TraceExporter.fate(status: nil, retryAfter: nil) == .later(retryAfter: nil))
        #expect(TraceExporter.fate(status: 503, retryAfter: "7") == .later(retryAfter: .seconds(7)))
        #expect(TraceExporter.fate(status: 429, retryAfter: " 2 ") == .later(retryAfter: .seconds(2)))
        // A thousand years, or more than Int holds: a minute. A date, a negative number: the backoff alone.
        for header in ["31536000000", "99999999999999999999999", "61"] {
            #expect(TraceExporter.fate(status: 503, retryAfter: header) == .later(retryAfter: .seconds(60)))
        }
        for header in ["Wed, 21 Oct 2026 07:28:00 GMT", "-1", "", "1.5"] {
            #expect(TraceExporter.fate(status: 503, retryAfter: header) == .later(retryAfter: nil))
        }
        for status in [502, 504] {
            #expect(TraceExporter.fate(status: status, retryAfter: nil) == .later(retryAfter: nil))
        }
        for status in [400, 401, 403, 404, 413, 500, 501] {
            #expect(TraceExporter.fate(status: status, retryAfter: "1") == .refused)
        }
    }
}
