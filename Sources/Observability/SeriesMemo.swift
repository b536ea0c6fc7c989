import Synchronization

/// The label values of a series, as a caller's own key: up to three, unused ones empty.
public struct SeriesKey: Hashable, Sendable {
    let first: String
    let second: String
    let third: String

    public init(_ first: String, _ second: String = "", _ third: String = "") {
        self.first = first
        self.second = second
        self.third = third
    }
}

/// Series of one family found again by their label values, made by the registry the first time. A lookup in the
/// registry by ``Labels`` builds a dictionary and hashes every label's name and value, then the family's name,
/// under the registry's lock: about a microsecond, and the worker looks up several series at every job. Here a
/// lookup hashes the values once. The registry keeps the series either way (the same one for the same labels), so
/// this holds no more than it does.
public final class SeriesMemo<Series: AnyObject & Sendable>: Sendable {
    private let made = Mutex<[SeriesKey: Series]>([:])

    public init() {}

    /// The series of `key`, made by `make` (a lookup in the registry) the first time.
    public func series(_ key: SeriesKey, _ make: () -> Series) -> Series {
        if let known = made.withLock({ $0[key] }) { return known }
        let series = make()
        made.withLock { $0[key] = series }
        return series
    }
}
