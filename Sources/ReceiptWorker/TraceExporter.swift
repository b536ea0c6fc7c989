import Foundation
import HTTPClient
import Lifecycle
import Observability
import Runtime
import Synchronization

/// Spans sent to an OpenTelemetry collector over OTLP/HTTP (protobuf, `otel.endpoint`), in batches of
/// `otel.max_export_batch_size`, from a queue of bounded size (`otel.max_queued_spans`). A job never waits for its
/// trace: spans are queued in memory and sent by this service alone, on an HTTP client of its own. A span that finds
/// the queue full is dropped and counted. A batch the collector cannot take now (429, 502, 503, 504, or no answer) goes
/// back to the front of the queue, as much of it as the queue has room for, and is sent again after a backoff that
/// doubles to a minute and honours `Retry-After`; a batch it refuses (any other status: 400 is bad data) is dropped
/// and counted, never sent again (OTLP/HTTP's rules).
final class TraceExporter: Service, Sendable {
    let settings: WorkerConfiguration.Tracing
    let endpoint: String
    let serviceName: String
    let version: String
    private let http: HTTPClient
    private let queue = Mutex<[FinishedSpan]>([])
    /// How long to wait before the next send after the collector could not take a batch (nil: the interval).
    private let backoff = Mutex<Duration?>(nil)
    private let exported: Counter
    private let droppedFull: Counter
    private let droppedFailed: Counter
    private let retried: Counter

    init(_ tracing: WorkerConfiguration.Tracing, endpoint: String, registry: MetricsRegistry, logger: Logger) {
        settings = tracing
        self.endpoint = endpoint
        serviceName =
            tracing.serviceName ?? tracing.resourceAttributes.last { $0.0 == "service.name" }?.1 ?? "receipt-worker"
        version = BuildInfo.version
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 2
        http = HTTPClient(configuration: configuration, logger: logger)
        exported = registry.counter(
            "receipt_worker_trace_spans_exported_total", help: "Spans the OTLP collector took (otel.endpoint).")
        let dropped = { (reason: String) in
            registry.counter(
                "receipt_worker_trace_spans_dropped_total",
                help:
                    "Spans dropped: the queue full (otel.max_queued_spans), or a batch the collector refused (export_failed).",
                labels: ["reason": reason])
        }
        droppedFull = dropped("queue_full")
        droppedFailed = dropped("export_failed")
        retried = registry.counter(
            "receipt_worker_trace_export_retries_total",
            help: "Batches the OTLP collector could not take then (429, 502, 503, 504, no answer), queued again.")
    }

    /// A tracer whose ended spans queue here, sampling roots at `ratio`.
    func tracer(sampleRatio ratio: Double) -> Tracer {
        Tracer(sampleRatio: ratio) { [weak self] in self?.enqueue($0) }
    }

    func enqueue(_ span: FinishedSpan) {
        let queued = queue.withLock { queue -> Bool in
            guard queue.count < settings.maxQueuedSpans else { return false }
            queue.append(span)
            return true
        }
        if !queued { droppedFull.increment() }
    }

    /// Sends what is queued every `otel.export_interval_ms` (or after a backoff), and once more when the worker stops
    /// (after the runtime drained).
    func run() async {
        let shutdown = GracefulShutdown.current
        while !Task.isCancelled && !shutdown.isTriggered {
            await shutdown.sleep(for: backoff.withLock { $0 } ?? settings.exportInterval)
            await flush()
        }
        await flush()
    }

    /// Sends every batch queued now; a batch the collector cannot take now ends this round, queued again.
    func flush() async {
        while true {
            let spans = queue.withLock { queue -> [FinishedSpan] in
                let taken = Array(queue.prefix(settings.batchSize))
                queue.removeFirst(taken.count)
                return taken
            }
            guard !spans.isEmpty else { return }
            let response = try? await http.execute(request(spans))
            switch Self.fate(status: response?.status, retryAfter: response?.header("retry-after")) {
            case .taken:
                exported.increment(by: spans.count)
                backoff.withLock { $0 = nil }
            case .refused:
                droppedFailed.increment(by: spans.count)
                backoff.withLock { $0 = nil }
            case .later(let retryAfter):
                retried.increment()
                requeue(spans)
                backoff.withLock { current in
                    let doubled = min((current ?? settings.exportInterval) * 2, .seconds(60))
                    current = max(doubled, min(retryAfter ?? .zero, .seconds(60)))
                }
                return
            }
        }
    }

    /// A batch back at the front of the queue, as much of it as fits beside what was queued since; the rest dropped.
    private func requeue(_ spans: [FinishedSpan]) {
        let kept = queue.withLock { queue -> Int in
            let room = max(0, settings.maxQueuedSpans - queue.count)
            let kept = Array(spans.prefix(room))
            queue.insert(contentsOf: kept, at: 0)
            return kept.count
        }
        if kept < spans.count { droppedFailed.increment(by: spans.count - kept) }
    }

    private func request(_ spans: [FinishedSpan]) -> HTTPRequest {
        let encoded = OTLPEncoding.exportRequest(
            spans, service: serviceName, version: version, resource: settings.resourceAttributes)
        var headers = [("Content-Type", "application/x-protobuf"), ("User-Agent", "receipt-worker/\(version)")]
        var body = encoded
        if settings.gzip, let compressed = Gzip.compress(encoded) {
            body = compressed
            headers.append(("Content-Encoding", "gzip"))
        }
        headers += settings.headers
        return HTTPRequest(method: .post, url: endpoint, headers: headers, body: Data(body), timeout: settings.timeout)
    }

    /// What became of a batch, by the collector's answer.
    enum Fate: Equatable {
        case taken
        /// Not now: sent again, not before `Retry-After` when the collector said one.
        case later(retryAfter: Duration?)
        /// Never: dropped.
        case refused
    }

    /// OTLP/HTTP's rules: 2xx taken; 429, 502, 503, 504 and no answer at all sent again; anything else (400 is bad
    /// data) never. `Retry-After` in seconds (a date, or a number past a day, is not waited for: the backoff is).
    static func fate(status: Int?, retryAfter: String?) -> Fate {
        guard let status else { return .later(retryAfter: nil) }
        switch status {
        case 200..<300: return .taken
        case 429, 502, 503, 504:
            let seconds = retryAfter.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            return .later(retryAfter: seconds.flatMap { (0...86_400).contains($0) ? .seconds($0) : nil })
        default: return .refused
        }
    }
}
