import Foundation
import HTTPServerKit
import Lifecycle
import Observability
import Testing

@testable import Configuration
@testable import ReceiptWorker

/// The exporter's queue at the worker's stop: what ends after the last send is counted, and a slow collector does not
/// hold the stop.
@Suite struct TraceExporterTests {
    @Test("a span that ends after the exporter's last send is dropped and counted, not queued where nothing reads")
    func spanAfterTheLastSend() async throws {
        let registry = MetricsRegistry()
        var tracing = WorkerConfiguration.Tracing()
        tracing.endpoint = "http://127.0.0.1:1/v1/traces"  // never called: nothing is queued when it sends
        let exporter = TraceExporter(
            tracing, endpoint: "http://127.0.0.1:1/v1/traces", registry: registry,
            logger: Logger(label: "trace-exporter-test", minimumLevel: .critical))
        await exporter.flush(last: true)
        let context = try #require(SpanContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        exporter.enqueue(
            FinishedSpan(
                name: "ledger prune", kind: .internal, context: context, parentSpanID: nil, start: 1, end: 2,
                attributes: [], error: nil))
        #expect(registry.render().contains("receipt_worker_trace_spans_dropped_total{reason=\"export_failed\"} 1\n"))
    }

    @Test("a collector that answers slowly does not hold the worker's stop: the round in progress ends at its batch")
    func slowCollectorAtStop() async throws {
        // Each batch answered 200 after 600 ms, under the exporter's timeout: 20 batches are 12 s of sending.
        let server = try MicroHTTPServer(host: "127.0.0.1", port: 0) { _ in
            try? await Task.sleep(for: .milliseconds(600))
            return .text(200, "")
        }
        server.start()
        defer { server.stop() }
        let endpoint = "http://127.0.0.1:\(server.port)/v1/traces"
        var tracing = WorkerConfiguration.Tracing()
        tracing.endpoint = endpoint
        tracing.batchSize = 1
        tracing.exportInterval = .milliseconds(100)
        tracing.timeout = .seconds(5)
        let exporter = TraceExporter(
            tracing, endpoint: endpoint, registry: MetricsRegistry(),
            logger: Logger(label: "trace-exporter-test", minimumLevel: .critical))
        let context = try #require(SpanContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        for _ in 0..<20 {
            exporter.enqueue(
                FinishedSpan(
                    name: "process receipt-jobs", kind: .consumer, context: context, parentSpanID: nil, start: 1,
                    end: 2,
                    attributes: [], error: nil))
        }
        let shutdown = GracefulShutdown()
        let running = Task { await GracefulShutdown.$current.withValue(shutdown) { await exporter.run() } }
        try await Task.sleep(for: .milliseconds(900))  // a round is sending
        let stopping = ContinuousClock.now
        shutdown.trigger()
        await running.value
        // The batch in flight (0.6 s), then the last send's 5 s at most; the whole queue would have been 11 s more.
        #expect(ContinuousClock.now - stopping < .seconds(8.5), "the stop waited for the collector")
    }
}
