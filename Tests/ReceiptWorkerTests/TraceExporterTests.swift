import Observability
import Testing

@testable import Configuration
@testable import ReceiptWorker

/// The exporter's queue at the worker's stop, without a collector: what ends after the last send is counted.
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
}
