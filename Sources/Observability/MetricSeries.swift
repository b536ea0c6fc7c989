import Foundation
import Synchronization

protocol MetricSeries: Sendable {
    func render(name: String, labels: Labels, into out: inout String)
}

/// A count that only goes up.
public final class Counter: MetricSeries {
    private let count = Atomic<Int>(0)
    public func increment(by amount: Int = 1) { count.add(amount, ordering: .relaxed) }
    public var value: Int { count.load(ordering: .relaxed) }
    func render(name: String, labels: Labels, into out: inout String) {
        out += "\(name)\(labels.rendered) \(value)\n"
    }
}

/// A value that goes up and down.
public final class Gauge: MetricSeries {
    private let current = Atomic<Int>(0)
    public func set(_ value: Int) { current.store(value, ordering: .relaxed) }
    public func add(_ amount: Int) { current.add(amount, ordering: .relaxed) }
    public var value: Int { current.load(ordering: .relaxed) }
    func render(name: String, labels: Labels, into out: inout String) {
        out += "\(name)\(labels.rendered) \(value)\n"
    }
}

/// Observations counted into cumulative buckets, with their sum and count.
public final class Histogram: MetricSeries {
    public let buckets: [Double]
    private struct State {
        var counts: [Int]
        var sum = 0.0
        var count = 0
    }
    private let state: Mutex<State>

    init(buckets: [Double]) {
        self.buckets = buckets.sorted()
        state = Mutex(State(counts: Array(repeating: 0, count: buckets.count)))
    }

    public func observe(_ value: Double) {
        let index = buckets.firstIndex { value <= $0 }
        state.withLock { state in
            if let index { state.counts[index] += 1 }
            state.sum += value
            state.count += 1
        }
    }

    public func observe(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        observe(Double(seconds) + Double(attoseconds) / 1e18)
    }

    public var count: Int { state.withLock { $0.count } }

    func render(name: String, labels: Labels, into out: inout String) {
        let snapshot = state.withLock { $0 }
        var cumulative = 0
        for (bound, count) in zip(buckets, snapshot.counts) {
            cumulative += count
            out += "\(name)_bucket\(labels.rendered(adding: ("le", MetricsRegistry.format(bound)))) \(cumulative)\n"
        }
        out += "\(name)_bucket\(labels.rendered(adding: ("le", "+Inf"))) \(snapshot.count)\n"
        out += "\(name)_sum\(labels.rendered) \(snapshot.sum)\n"
        out += "\(name)_count\(labels.rendered) \(snapshot.count)\n"
    }
}
