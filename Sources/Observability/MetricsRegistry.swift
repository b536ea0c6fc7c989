import Foundation
import Synchronization

/// Prometheus metrics: counters, gauges and histograms with labels, and values read at scrape time.
/// Updating a series is one atomic add (counters, gauges) or one short lock (histograms); series are
/// looked up once and kept by the caller on hot paths.
public final class MetricsRegistry: Sendable {
    public enum Kind: String, Sendable { case counter, gauge, histogram }

    private struct Family {
        let name: String
        let help: String
        let kind: Kind
        var series: [Labels: any MetricSeries] = [:]
        /// For values read at scrape time (gauges of state owned elsewhere).
        var collect: (@Sendable () -> [(Labels, Double)])?
    }

    /// The families in registration order (the exposition's), and where each name is: a series looked up per
    /// job found its family by comparing names one by one, a few microseconds of every job.
    private struct Families {
        var list: [Family] = []
        var index: [String: Int] = [:]

        mutating func remove(_ name: String) {
            guard index[name] != nil else { return }
            list.removeAll { $0.name == name }
            index = Dictionary(uniqueKeysWithValues: list.enumerated().map { ($1.name, $0) })
        }

        mutating func append(_ family: Family) -> Int {
            list.append(family)
            index[family.name] = list.count - 1
            return list.count - 1
        }
    }

    private let families = Mutex(Families())

    public init() {}

    public func counter(_ name: String, help: String, labels: Labels = [:]) -> Counter {
        series(name, help: help, kind: .counter, labels: labels) { Counter() }
    }

    public func gauge(_ name: String, help: String, labels: Labels = [:]) -> Gauge {
        series(name, help: help, kind: .gauge, labels: labels) { Gauge() }
    }

    public func histogram(_ name: String, help: String, buckets: [Double], labels: Labels = [:]) -> Histogram {
        series(name, help: help, kind: .histogram, labels: labels) { Histogram(buckets: buckets) }
    }

    /// A gauge family whose series are read from `values` on every scrape.
    public func gauges(_ name: String, help: String, values: @escaping @Sendable () -> [(Labels, Double)]) {
        collected(name, help: help, kind: .gauge, values: values)
    }

    /// A counter family whose series are read from `values` on every scrape (counts kept elsewhere).
    public func counters(_ name: String, help: String, values: @escaping @Sendable () -> [(Labels, Double)]) {
        collected(name, help: help, kind: .counter, values: values)
    }

    private func collected(
        _ name: String, help: String, kind: Kind, values: @escaping @Sendable () -> [(Labels, Double)]
    ) {
        families.withLock { families in
            families.remove(name)
            _ = families.append(Family(name: name, help: help, kind: kind, collect: values))
        }
    }

    private func series<S: MetricSeries>(_ name: String, help: String, kind: Kind, labels: Labels, make: () -> S) -> S {
        families.withLock { families in
            let index = families.index[name] ?? families.append(Family(name: name, help: help, kind: kind))
            precondition(
                families.list[index].kind == kind, "metric \(name) registered as \(families.list[index].kind)")
            if let existing = families.list[index].series[labels] as? S { return existing }
            let created = make()
            families.list[index].series[labels] = created
            return created
        }
    }

    /// Every metric in the Prometheus text exposition format (version 0.0.4).
    public func render() -> String {
        let snapshot = families.withLock { $0.list }
        var out = ""
        out.reserveCapacity(8_192)
        for family in snapshot {
            out += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(family.kind.rawValue)\n"
            if let collect = family.collect {
                for (labels, value) in collect().sorted(by: { $0.0.rendered < $1.0.rendered }) {
                    out += "\(family.name)\(labels.rendered) \(Self.format(value))\n"
                }
            }
            for (labels, series) in family.series.sorted(by: { $0.key.rendered < $1.key.rendered }) {
                series.render(name: family.name, labels: labels, into: &out)
            }
        }
        return out
    }

    static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return value.isInfinite ? (value > 0 ? "+Inf" : "-Inf") : String(value)
    }
}

/// Label names and values of one series. Rendered sorted by name, values escaped as Prometheus requires.
public struct Labels: Hashable, Sendable, ExpressibleByDictionaryLiteral {
    public let pairs: [String: String]
    public init(dictionaryLiteral elements: (String, String)...) {
        pairs = Dictionary(elements, uniquingKeysWith: { $1 })
    }
    public init(_ pairs: [String: String]) { self.pairs = pairs }
    /// A series without labels.
    public static let none = Labels([:])

    var rendered: String { rendered(adding: nil) }

    func rendered(adding extra: (String, String)?) -> String {
        var all = pairs.sorted { $0.key < $1.key }
        if let extra { all.append(extra) }
        guard !all.isEmpty else { return "" }
        let body = all.map { name, value in
            let escaped = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(
                of: "\"", with: "\\\""
            )
            .replacingOccurrences(of: "\n", with: "\\n")
            return "\(name)=\"\(escaped)\""
        }
        return "{" + body.joined(separator: ",") + "}"
    }
}
