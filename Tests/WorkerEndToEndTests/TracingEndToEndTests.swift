import Foundation
import Kafka
import Testing
import TestSupport

@testable import ReceiptWorker
import Flows
import Observability

/// Traces that leave the process (docs/metrics.md, "Traces"): a job's `process` span, its calls to Apple and the
/// ledger, and the `send` span whose context its events carry, exported over OTLP/HTTP to a receiver that decodes
/// each request with OpenTelemetry's own protocol definitions (Tests/tracing/otlp_receiver.py).
@Suite("Traces over OTLP/HTTP, decoded with opentelemetry-proto")
struct TracingEndToEndTests {
    /// The test receiver, a process of its own: its port, and the spans it decoded so far.
    final class Receiver: Sendable {
        let port: Int
        let spansFile: String
        private let pid: pid_t

        init(failFirst: Int = 0, status: Int = 503) async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("otlp-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let portFile = directory.appendingPathComponent("port").path
            spansFile = directory.appendingPathComponent("spans.jsonl").path
            let root = MetricsEndpointTests.repositoryRoot
            pid = try spawnProcess(
                root.appendingPathComponent(".deps/venv/bin/python").path,
                [root.appendingPathComponent("Tests/tracing/otlp_receiver.py").path, portFile, spansFile]
                    + (failFirst > 0 ? ["--fail-first", String(failFirst), String(status)] : []),
                environment: [:], output: directory.appendingPathComponent("out").path,
                errors: directory.appendingPathComponent("err").path)
            _ = await eventually(timeout: .seconds(30)) { FileManager.default.fileExists(atPath: portFile) }
            guard let text = try? String(contentsOfFile: portFile, encoding: .utf8), let port = Int(text) else {
                kill(pid, SIGKILL)
                throw TestSupportError("the OTLP receiver did not start")
            }
            self.port = port
        }

        var url: String { "http://127.0.0.1:\(port)/v1/traces" }

        var spans: [[String: Any]] {
            let text = (try? String(contentsOfFile: spansFile, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }

        func stop() {
            // SIGKILL: a child spawned from Swift's pool inherits its blocked SIGTERM.
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    @Test(
        "one job's whole tree: process (the job's span's child), Apple's call (its HTTP exchange beneath) and the ledger's round trips (their batch beneath), and the send span whose context the grant carries"
    )
    func oneJobsTree() async throws {
        let receiver = try await Receiver()
        let harness = try await WorkerHarness { configuration in
            configuration.tracing.endpoint = receiver.url
            configuration.tracing.exportInterval = .milliseconds(200)
        }
        let bought = try await harness.purchase(["product_id": "coins_100"])
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        let parent = "00f067aa0ba902b7"
        let body = try JSONSerialization.data(
            withJSONObject: job("job-t", order: "order-t", product: "coins_100", ["receipt": bought.receipt]))
        try await harness.submit(
            raw: body, key: "order-t", headers: [MessageHeader(name: "traceparent", string: "00-\(trace)-\(parent)-01")]
        )
        #expect(await harness.result(jobID: "job-t")?["decision"] as? String == "grant")
        let carried = try #require(
            harness.resultMessages(jobID: "job-t").first?.header("traceparent")?.stringValue)
        #expect(carried.hasPrefix("00-\(trace)-") && !carried.contains(parent), "the grant is the worker's child")
        let sendSpanID = String(carried.dropFirst(36).prefix(16))
        _ = await eventually(timeout: .seconds(30)) {
            receiver.spans.contains { $0["span_id"] as? String == sendSpanID }
        }
        let spans = receiver.spans.filter { $0["trace_id"] as? String == trace }
        #expect(!spans.contains { $0["error"] != nil }, "every export decodes")
        let process = try #require(spans.first { ($0["name"] as? String)?.hasPrefix("process ") == true })
        #expect(process["parent_span_id"] as? String == parent && process["kind"] as? Int == 5)
        #expect((process["attributes"] as? [String: Any])?["messaging.system"] as? String == "kafka")
        #expect(process["service"] as? String == "receipt-worker")
        let processID = try #require(process["span_id"] as? String)
        let children = spans.filter { $0["parent_span_id"] as? String == processID }
        let names = Set(children.compactMap { $0["name"] as? String })
        #expect(names.contains("apple verify") && names.contains("ledger_lookup") && names.contains("ledger_record"))
        let send = try #require(children.first { $0["span_id"] as? String == sendSpanID })
        #expect(send["name"] as? String == "send \(harness.topics.results)" && send["kind"] as? Int == 4)
        // Every child lies within the process span.
        let (start, end) = (process["start"] as? Int ?? 0, process["end"] as? Int ?? 0)
        #expect(children.allSatisfy { ($0["start"] as? Int ?? 0) >= start && ($0["end"] as? Int ?? .max) <= end })
        // Deeper layers add theirs under the span current where they are called, with nothing passed down: the
        // HTTP exchange with Apple under Apple's call, the ledger's batch under each ledger round trip.
        let verify = try #require(children.first { $0["name"] as? String == "apple verify" })
        let exchange = try #require(spans.first { $0["parent_span_id"] as? String == verify["span_id"] as? String })
        let exchangeAttributes = exchange["attributes"] as? [String: Any] ?? [:]
        #expect(exchange["name"] as? String == "POST" && exchange["kind"] as? Int == 3)
        #expect(exchangeAttributes["http.response.status_code"] as? Int == 200)
        #expect(exchangeAttributes["server.address"] as? String == "127.0.0.1")
        #expect((exchangeAttributes["url.full"] as? String)?.contains("?") == false)
        let record = try #require(children.first { $0["name"] as? String == "ledger_record" })
        let batch = try #require(spans.first { $0["parent_span_id"] as? String == record["span_id"] as? String })
        #expect(batch["name"] as? String == "ledger batch")
        #expect((batch["attributes"] as? [String: Any])?["receipt_worker.ledger.batch_size"] as? Int ?? 0 >= 1)
        await harness.stop()
        receiver.stop()
    }

    @Test(
        "configured by OpenTelemetry's own variables: the endpoint's v1/traces, gzip bodies, the headers, the service and resource"
    )
    func standardVariables() async throws {
        let receiver = try await Receiver()
        let loaded = try ConfigurationLoader.load(
            file: nil, overrides: ["apple.bundle_id=com.example.game"],
            environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)",
                "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=k%3D1,x-team=games",
                "OTEL_SERVICE_NAME": "receipts-eu", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
                "OTEL_BSP_SCHEDULE_DELAY": "200",
            ])
        #expect(loaded.tracing.endpoint == receiver.url)
        let harness = try await WorkerHarness { configuration in configuration.tracing = loaded.tracing }
        let bought = try await harness.purchase(["product_id": "coins_100"])
        try await harness.submit(
            job("job-v", order: "order-v", product: "coins_100", ["signed_transaction": bought.signedTransaction]))
        #expect(await harness.result(jobID: "job-v")?["decision"] as? String == "grant")
        #expect(await eventually(timeout: .seconds(30)) { !receiver.spans.isEmpty })
        let span = try #require(receiver.spans.first)
        #expect(span["error"] == nil, "the gzip body decodes")
        #expect(span["content_encoding"] as? String == "gzip")
        #expect(span["headers"] as? [String: String] == ["x-api-key": "k=1", "x-team": "games"])
        #expect(span["service"] as? String == "receipts-eu")
        #expect((span["resource"] as? [String: Any])?["deployment.environment"] as? String == "test")
        await harness.stop()
        receiver.stop()
    }

    @Test("a collector that is away costs the jobs nothing: they are answered, its batches sent again once it is back")
    func collectorAway() async throws {
        let receiver = try await Receiver(failFirst: 2)
        let harness = try await WorkerHarness { configuration in
            configuration.tracing.endpoint = receiver.url
            configuration.tracing.exportInterval = .milliseconds(200)
        }
        let bought = try await harness.purchase(["product_id": "coins_100"])
        try await harness.submit(
            job("job-a", order: "order-a", product: "coins_100", ["signed_transaction": bought.signedTransaction]))
        #expect(await harness.result(jobID: "job-a")?["decision"] as? String == "grant")
        // Two 503s with Retry-After: 1, then taken: every span of the job arrives, none dropped.
        #expect(
            await eventually(timeout: .seconds(30)) {
                receiver.spans.contains { ($0["name"] as? String)?.hasPrefix("process ") == true }
            })
        let page = harness.worker.metrics.registry.render()
        #expect(page.contains("\nreceipt_worker_trace_export_retries_total 2\n"))
        #expect(page.contains("\nreceipt_worker_trace_spans_dropped_total{reason=\"export_failed\"} 0\n"))
        await harness.stop()
        receiver.stop()
    }

    @Test("a collector that refuses a batch (400) has it dropped and counted, never sent again")
    func collectorRefuses() async throws {
        let receiver = try await Receiver(failFirst: 1_000, status: 400)
        let harness = try await WorkerHarness { configuration in
            configuration.tracing.endpoint = receiver.url
            configuration.tracing.exportInterval = .milliseconds(200)
        }
        let bought = try await harness.purchase(["product_id": "coins_100"])
        try await harness.submit(
            job("job-r", order: "order-r", product: "coins_100", ["signed_transaction": bought.signedTransaction]))
        #expect(await harness.result(jobID: "job-r")?["decision"] as? String == "grant")
        #expect(
            await eventually(timeout: .seconds(30)) {
                harness.worker.metrics.registry.render().contains(
                    "receipt_worker_trace_spans_dropped_total{reason=\"export_failed\"}")
                    && !harness.worker.metrics.registry.render().contains(
                        "receipt_worker_trace_spans_dropped_total{reason=\"export_failed\"} 0")
            })
        #expect(harness.worker.metrics.registry.render().contains("\nreceipt_worker_trace_export_retries_total 0\n"))
        await harness.stop()
        receiver.stop()
    }
}
