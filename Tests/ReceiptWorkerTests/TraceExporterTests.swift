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

    @Test(
        "a collector that answers slowly does not hold the worker's stop: the request in flight ends, and the last send takes 5 s in all"
    )
    func slowCollectorAtStop() async throws {
        // Each batch answered 200 after 4 s, under the exporter's timeout (10 s): 20 batches are 80 s of sending.
        let server = try MicroHTTPServer(host: "127.0.0.1", port: 0) { _ in
            try? await Task.sleep(for: .seconds(4))
            return .text(200, "")
        }
        server.start()
        defer { server.stop() }
        let endpoint = "http://127.0.0.1:\(server.port)/v1/traces"
        var tracing = WorkerConfiguration.Tracing()
        tracing.endpoint = endpoint
        tracing.batchSize = 1
        tracing.exportInterval = .milliseconds(100)
        tracing.timeout = .seconds(10)
        let exporter = TraceExporter(
            tracing, endpoint: endpoint, registry: MetricsRegistry(),
            logger: Logger(label: "trace-exporter-test", minimumLevel: .critical))
        let context = try #require(SpanContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        for _ in 0..<20 {
            exporter.enqueue(
                FinishedSpan(
                    name: "process receipt-jobs", kind: .consumer, context: context, parentSpanID: nil, start: 1,
                    end: 2, attributes: [], error: nil))
        }
        let shutdown = GracefulShutdown()
        let running = Task { await GracefulShutdown.$current.withValue(shutdown) { await exporter.run() } }
        try await Task.sleep(for: .milliseconds(1_500))  // a round's first request is in flight
        let stopping = ContinuousClock.now
        shutdown.trigger()
        await running.value
        // The last send's 5 s; waiting for the request in flight, then a second one begun before the 5 s ran out,
        // would be over 10 s; the whole queue 80 s.
        #expect(ContinuousClock.now - stopping < .seconds(8), "the stop waited for the collector")
    }
}
