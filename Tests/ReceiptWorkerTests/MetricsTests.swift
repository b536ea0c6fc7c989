import Foundation
import Observability
import Testing

@Suite("Prometheus metrics")
struct MetricsTests {
    @Test("counters, gauges and scrape-time values render in the Prometheus text format")
    func rendersText() {
        let registry = MetricsRegistry()
        let granted = registry.counter(
            "rw_decisions_total", help: "Decisions.", labels: ["decision": "grant", "reason": "verified"])
        granted.increment()
        granted.increment(by: 2)
        registry.gauge("rw_in_flight", help: "In flight.").set(7)
        registry.gauges("rw_offset", help: "Offsets.") { [(Labels(["partition": "1", "topic": "jobs \"a\""]), 42)] }
        let text = registry.render()
        #expect(text.contains("# HELP rw_decisions_total Decisions.\n# TYPE rw_decisions_total counter\n"))
        #expect(text.contains("rw_decisions_total{decision=\"grant\",reason=\"verified\"} 3\n"))
        #expect(text.contains("# TYPE rw_in_flight gauge\nrw_in_flight 7\n"))
        #expect(text.contains("rw_offset{partition=\"1\",topic=\"jobs \\\"a\\\"\"} 42\n"))
    }

    @Test("a histogram has cumulative buckets, +Inf, sum and count")
    func histogram() {
        let registry = MetricsRegistry()
        let latency = registry.histogram(
            "rw_seconds", help: "Latency.", buckets: [0.1, 0.5, 1], labels: ["endpoint": "x"])
        for value in [0.05, 0.2, 0.3, 2.0] { latency.observe(value) }
        latency.observe(.milliseconds(100))
        let text = registry.render()
        #expect(text.contains("rw_seconds_bucket{endpoint=\"x\",le=\"0.1\"} 2\n"))
        #expect(text.contains("rw_seconds_bucket{endpoint=\"x\",le=\"0.5\"} 4\n"))
        #expect(text.contains("rw_seconds_bucket{endpoint=\"x\",le=\"1\"} 4\n"))
        #expect(text.contains("rw_seconds_bucket{endpoint=\"x\",le=\"+Inf\"} 5\n"))
        #expect(text.contains("rw_seconds_count{endpoint=\"x\"} 5\n"))
        #expect(text.contains("rw_seconds_sum{endpoint=\"x\"} 2.65"))
    }

    @Test("the same name and labels give the same series")
    func sameSeries() {
        let registry = MetricsRegistry()
        registry.counter("rw_total", help: "h", labels: ["a": "1"]).increment()
        registry.counter("rw_total", help: "h", labels: ["a": "1"]).increment()
        #expect(registry.counter("rw_total", help: "h", labels: ["a": "1"]).value == 2)
        #expect(registry.render().components(separatedBy: "# TYPE rw_total").count == 2)
    }

    @Test("a series found again by its labels' values is the registry's, one per values")
    func memoizedSeries() {
        let registry = MetricsRegistry()
        let memo = SeriesMemo<Counter>()
        func decided(_ app: String, _ reason: String) -> Counter {
            memo.series(SeriesKey(app, "deny", reason)) {
                registry.counter("rw_decisions_total", help: "h", labels: ["app": app, "reason": reason])
            }
        }
        decided("a", "sandbox").increment()
        decided("a", "sandbox").increment()
        decided("b", "sandbox").increment()
        #expect(
            decided("a", "sandbox")
                === registry.counter("rw_decisions_total", help: "h", labels: ["app": "a", "reason": "sandbox"]))
        #expect(registry.render().contains("rw_decisions_total{app=\"a\",reason=\"sandbox\"} 2\n"))
        #expect(registry.render().contains("rw_decisions_total{app=\"b\",reason=\"sandbox\"} 1\n"))
        // Values that would run together if joined stay apart.
        #expect(decided("ab", "c") !== decided("a", "bc"))
    }
}
