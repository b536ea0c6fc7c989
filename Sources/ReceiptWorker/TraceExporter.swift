import Lifecycle
import Foundation
import HTTPClient
import Observability
import Runtime
import Synchronization

/// Spans sent to an OpenTelemetry collector over OTLP/HTTP (protobuf, `otel.endpoint`), in batches, from a queue
/// of bounded size: a span that finds the queue full, or a batch the collector does not take (away, slow,
/// refusing), is dropped and counted, never retried and never waited for. A job never waits for its trace:
/// spans are queued in memory and sent by this service alone, on an HTTP client of its own.
final class TraceExporter: Service, Sendable {
    let endpoint: String
    let capacity: Int
    let interval: Duration
    let version: String
    private let http: HTTPClient
    private let queue = Mutex<[FinishedSpan]>([])
    private let exported: Counter
    private let droppedFull: Counter
    private let droppedFailed: Counter

    /// Spans per request.
    static let batch = 512

    init(_ tracing: WorkerConfiguration.Tracing, endpoint: String, registry: MetricsRegistry, logger: Logger) {
        self.endpoint = endpoint
        capacity = tracing.maxQueuedSpans
        interval = tracing.exportInterval
        version = BuildInfo.version
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 2
        http = HTTPClient(configuration: configuration, logger: logger)
        exported = registry.counter(
            "receipt_worker_trace_spans_exported_total", help: "Spans the OTLP collector took (otel.endpoint).")
        let dropped = { (reason: String) in
            registry.counter(
                "receipt_worker_trace_spans_dropped_total",
                help: "Spans dropped: the queue full (otel.max_queued_spans), or the collector not taking a batch.",
                labels: ["reason": reason])
        }
        droppedFull = dropped("queue_full")
        droppedFailed = dropped("export_failed")
    }

    /// A tracer whose ended spans queue here, sampling roots at `ratio`.
    func tracer(sampleRatio ratio: Double) -> Tracer {
        Tracer(sampleRatio: ratio) { [weak self] in self?.enqueue($0) }
    }

    func enqueue(_ span: FinishedSpan) {
        let queued = queue.withLock { queue -> Bool in
            guard queue.count < capacity else { return false }
            queue.append(span)
            return true
        }
        if !queued { droppedFull.increment() }
    }

    /// Sends what is queued every `interval`, and once more when the worker stops (after the runtime drained).
    func run() async {
        let shutdown = GracefulShutdown.current
        while !Task.isCancelled && !shutdown.isTriggered {
            await shutdown.sleep(for: interval)
            await flush()
        }
        await flush()
    }

    /// Sends every batch queued now; a batch the collector does not take ends this round, dropped.
    func flush() async {
        while true {
            let spans = queue.withLock { queue -> [FinishedSpan] in
                let taken = Array(queue.prefix(Self.batch))
                queue.removeFirst(taken.count)
                return taken
            }
            guard !spans.isEmpty else { return }
            let body = OTLPEncoding.exportRequest(spans, service: "receipt-worker", version: version)
            let request = HTTPRequest(
                method: .post, url: endpoint, headers: [("Content-Type", "application/x-protobuf")],
                body: Data(body), timeout: .seconds(5))
            guard let response = try? await http.execute(request), (200..<300).contains(response.status) else {
                droppedFailed.increment(by: spans.count)
                return
            }
            exported.increment(by: spans.count)
        }
    }
}
