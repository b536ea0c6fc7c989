import Foundation
import HTTPClient
import Observability
import ReceiptWorker
import TestSupport
import Synchronization
import Testing
import Flows

/// `/metrics`, `/healthz` and `/readyz` of a worker that handles real jobs.
@Suite("Metrics endpoint") struct MetricsEndpointTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test("counters move with the jobs; /readyz turns ready once partitions are assigned; dashboards name real metrics")
    func metricsMove() async throws {
        let harness = try await WorkerHarness()
        let endpoint = try MetricsEndpoint(listen: ListenAddress(host: "127.0.0.1", port: 0), worker: harness.worker)
        endpoint.start()
        let base = "http://127.0.0.1:\(endpoint.port)"
        func get(_ path: String) async throws -> (status: Int, body: String) {
            let response = try await harness.http.execute(HTTPRequest(url: base + path))
            return (response.status, String(decoding: response.body, as: UTF8.self))
        }
        #expect(try await get("/healthz").status == 200)
        #expect(try await get("/nowhere").status == 404)
        #expect(await eventually(timeout: .seconds(60)) { (try? await get("/readyz").status) == 200 })

        let purchase = try await harness.purchase(["product_id": "coins_100"])
        try await harness.submit(job("m-1", order: "m-order-1", product: "coins_100", ["receipt": purchase.receipt]))
        try await harness.submit(raw: Data("not json".utf8), key: "m-bad")
        #expect(await harness.result(jobID: "m-1") != nil)
        #expect(await eventually { harness.deadLetters.count == 1 })

        let scraped = await eventually(timeout: .seconds(10)) {
            let text = (try? await get("/metrics").body) ?? ""
            return text.contains("receipt_worker_jobs_consumed_total 2\n")
                && text.contains("receipt_worker_jobs_in_flight{group=\"default\"} 0\n")
                && text.contains("receipt_worker_partition_committed_offset{")
        }
        #expect(scraped)
        let text = try await get("/metrics").body
        // The release this process runs, as --version, the image tag and the changelog name it (check_deploy).
        #expect(
            text.contains(
                "receipt_worker_build_info{allocator=\"\(BuildInfo.allocator)\",revision=\"\(BuildInfo.revision)\",version=\"\(BuildInfo.version)\"} 1\n"
            ))
        #expect(
            text.contains("receipt_worker_decisions_total{app=\"default\",decision=\"grant\",reason=\"verified\"} 1\n"))
        #expect(
            text.contains(
                "receipt_worker_decisions_total{app=\"default\",decision=\"deny\",reason=\"product_mismatch\"} 0\n"))
        #expect(text.contains("receipt_worker_dlq_messages_total{group=\"default\",reason=\"malformed_job\"} 1\n"))
        #expect(
            text.contains(
                "receipt_worker_apple_request_duration_seconds_count{app=\"default\",endpoint=\"verify_receipt_production\",outcome=\"ok\"} 1\n"
            ))
        #expect(
            text.contains(
                "receipt_worker_circuit_state{app=\"default\",call=\"verify_receipt_production\",state=\"closed\"} 1\n")
        )
        #expect(text.contains("receipt_worker_ledger_up 1\n"))
        #expect(text.contains("receipt_worker_ready 1\n"))
        #expect(!text.contains(purchase.receipt))

        // Every metric the Grafana dashboard and the Prometheus rules query is one the worker exports; the support
        // desk's (receipt_worker_desk_*) are its own process's, checked against its registry by check_deploy.py.
        let exported = Set(
            text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) })
        for file in ["deploy/grafana/receipt-worker-dashboard.json", "deploy/prometheus/receipt-worker-rules.yaml"] {
            let queried = try Self.metricNames(in: Self.repositoryRoot.appendingPathComponent(file))
                .filter { !$0.hasPrefix("receipt_worker_desk_") }
            #expect(!queried.isEmpty, "\(file) names no metric")
            #expect(
                queried.subtracting(exported).isEmpty,
                "\(file) queries metrics the worker does not export: \(queried.subtracting(exported))")
        }

        harness.worker.shutdown()
        #expect(await eventually { (try? await get("/readyz").status) == 503 })
        endpoint.stop()
        await harness.stop()
    }

    @Test(
        "/startupz waits for the start (the ledger opened), /healthz fails only when the process is wedged, /readyz says why not ready"
    )
    func probes() async throws {
        let started = Atomic<Bool>(false)
        let wedged = Atomic<Bool>(false)
        let endpoint = try MetricsEndpoint(
            listen: ListenAddress(host: "127.0.0.1", port: 0), registry: MetricsRegistry(),
            readiness: { started.load(ordering: .relaxed) ? [] : ["starting"] },
            liveness: { wedged.load(ordering: .relaxed) ? ["partition receipt-jobs[0] wedged: lag 40"] : [] },
            starting: { started.load(ordering: .relaxed) ? [] : ["opening the ledger"] })
        endpoint.start()
        defer { endpoint.stop() }
        let http = HTTPClient(logger: Logger(label: "probe-test"))
        func get(_ path: String) async throws -> (status: Int, body: String) {
            let response = try await http.execute(HTTPRequest(url: "http://127.0.0.1:\(endpoint.port)\(path)"))
            return (response.status, String(decoding: response.body, as: UTF8.self))
        }
        // Starting (a migration may take minutes): alive, not started, not ready.
        #expect(try await get("/healthz").status == 200)
        let starting = try await get("/startupz")
        #expect(starting.status == 503 && starting.body.contains("opening the ledger"), "\(starting)")
        #expect(try await get("/readyz").status == 503)
        started.store(true, ordering: .relaxed)
        #expect(try await get("/startupz").status == 200)
        #expect(try await get("/readyz").status == 200)
        // Wedged: the liveness probe fails, with the reason, so kubelet restarts the pod.
        wedged.store(true, ordering: .relaxed)
        let health = try await get("/healthz")
        #expect(health.status == 503 && health.body.contains("wedged"), "\(health)")
        http.shutdown()
    }

    /// `receipt_worker_*` names in a file, with histogram suffixes taken back to the family's name.
    static func metricNames(in file: URL) throws -> Set<String> {
        let text = try String(contentsOf: file, encoding: .utf8)
        let regex = try NSRegularExpression(pattern: "receipt_worker_[a-z_]+")
        let names = regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { match in
            String(text[Range(match.range, in: text)!])
        }
        return Set(
            names.filter { !$0.hasSuffix("_") }.map { name in
                for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) && name.contains("_seconds") {
                    return String(name.dropLast(suffix.count))
                }
                return name
            })
    }
}

/// The in-flight budget with a slow Apple: jobs beyond it wait for a slot while the consumer goes on
/// reading (so rebalances and the poll loop are never held up by busy slots), then all are answered.
@Suite("In-flight budget") struct InFlightBudgetTests {
    @Test(
        "with every slot busy, jobs wait; with the waiting room full (ten budgets), intake pauses; all are answered")
    func budgetHolds() async throws {
        let harness = try await WorkerHarness { $0.maxInFlight = 2 }
        try await harness.faults(["latency_ms": 400])
        let registry = harness.worker.metrics.registry
        /// The gauge's value, summed over its series (by group); -1 when it has none.
        func gauge(_ name: String) -> Int {
            let lines = registry.render().split(separator: "\n").filter {
                $0.hasPrefix(name + " ") || $0.hasPrefix(name + "{")
            }
            return lines.isEmpty
                ? -1 : lines.compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +)
        }
        // Every purchase made first, and the worker in its group, then the jobs in one burst: on a busy
        // machine, jobs submitted between purchases would be answered before the room fills, and a group join
        // can take longer than the wait below.
        var receipts: [String] = []
        for _ in 0..<30 { receipts.append(try await harness.purchase(["product_id": "coins_100"]).receipt) }
        #expect(await eventually(timeout: .seconds(60)) { harness.worker.isReady }, "never joined its group")
        // Submitted at once, not one acknowledgement after another: on a busy broker those take long enough for
        // the worker to keep up, and the room would never fill.
        let ids = receipts.indices.map { "budget-\($0)" }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, receipt) in receipts.enumerated() {
                group.addTask {
                    try await harness.submit(
                        job(ids[index], order: "budget-order-\(index)", product: "coins_100", ["receipt": receipt]))
                }
            }
            try await group.waitForAll()
        }
        var sawWaiting = false
        var most = (waiting: 0, inFlight: 0, paused: 0)
        let busy = await eventually(timeout: .seconds(60)) {
            let inFlight = gauge("receipt_worker_jobs_in_flight")
            let waiting = gauge("receipt_worker_jobs_waiting")
            let paused = gauge("receipt_worker_intake_paused")
            #expect(inFlight <= 2)
            most = (max(most.waiting, waiting), max(most.inFlight, inFlight), max(most.paused, paused))
            if waiting >= 20 && inFlight == 2 && paused == 1 { sawWaiting = true }
            return sawWaiting
        }
        #expect(busy, "never saw jobs waiting behind a full budget with intake paused: at most \(most)")
        for id in ids { #expect(await harness.result(jobID: id)?["decision"] as? String == "grant", "\(id)") }
        #expect(gauge("receipt_worker_jobs_waiting") == 0)
        await harness.stop()
    }
}
