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
/// and counted, never sent again (OTLP/HTTP's rules); so is a batch tried five times. When the worker stops, what is
/// queued gets one last send, within 5 seconds in all; what is left then, and a span that ends after it, is dropped
/// and counted.
final class TraceExporter: Service, Sendable {
    let settings: WorkerConfiguration.Tracing
    let endpoint: String
    let serviceName: String
    let version: String
    private let http: HTTPClient
    private let logger: Logger
    /// The spans waiting to be sent; closed by the last send's end, after which a span that ends (a chore stopped
    /// after this service) is dropped and counted rather than queued where nothing reads.
    private let queue = Mutex<(spans: [FinishedSpan], closed: Bool)>(([], false))
    /// After the collector could not take a batch: how long to wait before the next send, and how often the batch at
    /// the queue's front was tried. Nil: the collector takes what it is sent.
    private let trouble = Mutex<(backoff: Duration, attempts: Int)?>(nil)
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
        configuration.recordsSpans = false  // a span of each export would be exported, and so on
        http = HTTPClient(configuration: configuration, logger: logger)
        self.logger = logger
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
        let queued = queue.withLock { queue -> Bool? in
            guard !queue.closed else { return nil }
            guard queue.spans.count < settings.maxQueuedSpans else { return false }
            queue.spans.append(span)
            return true
        }
        switch queued {
        case true: break
        case false: droppedFull.increment()
        case nil: droppedFailed.increment()
        }
    }

    /// Sends what is queued every `otel.export_interval_ms` (or after a backoff), and once more when the worker stops
    /// (after the runtime drained).
    func run() async {
        let shutdown = GracefulShutdown.current
        while !Task.isCancelled && !shutdown.isTriggered {
            await shutdown.sleep(for: trouble.withLock { $0?.backoff } ?? settings.exportInterval)
            if shutdown.isTriggered { break }
            await flush()
        }
        await flush(last: true)
    }

    /// A batch is tried at most this often; then it is dropped, so that one the collector always fails on (too large
    /// for a gateway, say) never holds the queue.
    static let attemptsPerBatch = 5
    /// The last send, when the worker stops, takes at most this long in all.
    static let lastSendTime = Duration.seconds(5)

    /// Sends every batch queued now; a batch the collector cannot take now ends this round, queued again. `last`: the
    /// worker stops; nothing is queued again, and what is left after ``lastSendTime`` is dropped.
    func flush(last: Bool = false) async {
        let started = ContinuousClock.now
        let shutdown = GracefulShutdown.current
        while true {
            // The worker stops: a round in progress ends at its next batch, and the last send (bounded) takes over;
            // a slow collector never holds the stop past the pod's grace period.
            if !last && shutdown.isTriggered { return }
            let spans = queue.withLock { queue -> [FinishedSpan] in
                let taken = Array(queue.spans.prefix(settings.batchSize))
                queue.spans.removeFirst(taken.count)
                if last && taken.isEmpty { queue.closed = true }  // the last send is done
                return taken
            }
            guard !spans.isEmpty else { return }
            if last && ContinuousClock.now - started > Self.lastSendTime {
                droppedFailed.increment(
                    by: spans.count
                        + queue.withLock { queue in
                            defer {
                                queue.spans.removeAll()
                                queue.closed = true
                            }
                            return queue.spans.count
                        })
                return
            }
            let answer: (status: Int?, retryAfter: String?, error: (any Error)?)
            // The last send's requests share its time; a round's request in flight ends when the worker stops, its
            // batch queued again for the last send.
            let timeout = last ? Self.lastSendTime - (ContinuousClock.now - started) : settings.timeout
            guard let sent = await send(request(spans, timeout: timeout), endingAt: last ? nil : shutdown) else {
                requeue(spans)
                return
            }
            switch sent {
            case .success(let response): answer = (response.status, response.header("retry-after"), nil)
            case .failure(let error): answer = (nil, nil, error)
            }
            let retriable = (answer.error as? HTTPClientError)?.isRetriable ?? true
            func fields() -> [String: String] {
                ["status": answer.status.map(String.init) ?? "-", "error": answer.error.map { "\($0)" } ?? "-"]
            }
            switch retriable ? Self.fate(status: answer.status, retryAfter: answer.retryAfter) : .refused {
            case .taken:
                exported.increment(by: spans.count)
                let recovered = trouble.withLock { trouble -> Bool in
                    defer { trouble = nil }
                    return trouble != nil
                }
                if recovered { logger.info("the trace collector takes spans again") }
            case .refused:
                droppedFailed.increment(by: spans.count)
                trouble.withLock { $0 = nil }
                logger.warning("the trace collector refused a batch of spans: dropped", fields())
            case .later(let retryAfter):
                retried.increment()
                let attempts = trouble.withLock { trouble -> Int in
                    let attempts = (trouble?.attempts ?? 0) + 1
                    let doubled = min((trouble?.backoff ?? settings.exportInterval) * 2, .seconds(60))
                    // ±20%, so that replicas do not all come back at one instant.
                    let jittered = doubled * Double.random(in: 0.8...1.2)
                    trouble = (max(jittered, retryAfter ?? .zero), attempts)
                    return attempts
                }
                if attempts == 1 {
                    logger.warning("the trace collector cannot take spans now; sent again after a backoff", fields())
                }
                if last || attempts >= Self.attemptsPerBatch {
                    droppedFailed.increment(by: spans.count)
                    trouble.withLock { $0?.attempts = 0 }
                    if last { continue }
                } else {
                    requeue(spans)
                }
                return
            }
        }
    }

    /// A batch back at the front of the queue, as much of it as fits beside what was queued since; the rest dropped.
    private func requeue(_ spans: [FinishedSpan]) {
        let kept = queue.withLock { queue -> Int in
            let room = max(0, settings.maxQueuedSpans - queue.spans.count)
            let kept = Array(spans.prefix(room))
            queue.spans.insert(contentsOf: kept, at: 0)
            return kept.count
        }
        if kept < spans.count { droppedFailed.increment(by: spans.count - kept) }
    }

    /// `request`'s answer, or nil when `shutdown` came first (the request cancelled).
    private func send(_ request: HTTPRequest, endingAt shutdown: GracefulShutdown?) async -> Result<
        HTTPResponse, any Error
    >? {
        let http = self.http
        @Sendable func execute() async -> Result<HTTPResponse, any Error> {
            do { return .success(try await http.execute(request)) } catch { return .failure(error) }
        }
        guard let shutdown else { return await execute() }
        return await withTaskGroup(of: Result<HTTPResponse, any Error>?.self) { group in
            group.addTask { await execute() }
            group.addTask {
                await shutdown.wait()
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    private func request(_ spans: [FinishedSpan], timeout: Duration) -> HTTPRequest {
        let encoded = OTLPEncoding.exportRequest(
            spans, service: serviceName, version: version, resource: settings.resourceAttributes)
        var headers = [("Content-Type", "application/x-protobuf"), ("User-Agent", "receipt-worker/\(version)")]
        var body = encoded
        if settings.gzip, let compressed = Gzip.compress(encoded) {
            body = compressed
            headers.append(("Content-Encoding", "gzip"))
        }
        headers += settings.headers
        return HTTPRequest(
            method: .post, url: endpoint, headers: headers, body: Data(body),
            timeout: max(.milliseconds(1), min(settings.timeout, timeout)))
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
    /// data) never. `Retry-After` in seconds, waited for up to a minute (a thousand years is a minute); a date, or
    /// what is no number, leaves the backoff alone.
    static func fate(status: Int?, retryAfter: String?) -> Fate {
        guard let status else { return .later(retryAfter: nil) }
        switch status {
        case 200..<300: return .taken
        case 429, 502, 503, 504:
            let text = retryAfter?.trimmingCharacters(in: .whitespaces) ?? ""
            guard !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
                return .later(retryAfter: nil)
            }
            // Digits only: a number too large for Int is past a minute too.
            return .later(retryAfter: .seconds(min(Int(text) ?? 60, 60)))
        default: return .refused
        }
    }
}
