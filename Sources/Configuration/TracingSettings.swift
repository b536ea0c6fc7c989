import Foundation

extension WorkerConfiguration {
    public struct Tracing: Sendable {
        /// `otel.endpoint`: the collector's OTLP/HTTP traces URL (`http://collector:4318/v1/traces`).
        public var endpoint: String?
        /// `otel.sample_ratio`: the share of root traces recorded (a job's trace that its sender sampled, or not,
        /// keeps that choice). Default: 1.
        public var sampleRatio = 1.0
        /// `otel.max_queued_spans`: spans held for the exporter at most; more are dropped and counted. Default:
        /// 8,192.
        public var maxQueuedSpans = 8_192
        /// `otel.export_interval_ms`: how often queued spans go out. Default: 1,000.
        public var exportInterval: Duration = .seconds(1)
        /// `otel.max_export_batch_size`: spans per request at most. Default: 512.
        public var batchSize = 512
        /// `otel.timeout_ms`: a request's limit. Default: 10,000.
        public var timeout: Duration = .seconds(10)
        /// `otel.compression`: `gzip` compresses each request's body. Default: none.
        public var gzip = false
        /// `otel.headers`: headers of each request (a collector's API key, often: never printed).
        public var headers: [(String, String)] = []
        /// `otel.service_name`: the resource's `service.name`; nil: `otel.resource_attributes`' or
        /// `receipt-worker`.
        public var serviceName: String?
        /// `otel.resource_attributes`: more attributes of the resource (`deployment.environment`, ...).
        public var resourceAttributes: [(String, String)] = []
        /// OpenTelemetry's variables that were not used, and why (warnings at start and in `check-config`).
        public var ignored: [String] = []
    }
}
