import Foundation

/// The process's budget of file descriptors, and the share of it a server may hold in connections.
///
/// A server's connection limit is what a flood of idle connections can take: below it, a probe still gets in.
/// Linux starts processes with a soft limit (often 1,024) far below the hard one (often 1,048,576 in a
/// container): `raiseToHardLimit()` lifts it, as Go's runtime does for every program since 1.19; a server then
/// takes a share of what remains beside what the process needs for itself (Kafka, the ledger, Apple).
public enum DescriptorBudget {
    /// Descriptors kept for everything but the servers' connections.
    public static let reserved = 1_024

    /// Raises the soft limit to the hard one (once per process is enough); returns the soft limit now.
    @discardableResult
    public static func raiseToHardLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1_024 }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// The soft limit now.
    public static var current: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1_024 }
        return Int(clamping: limit.rlim_cur)
    }

    /// Connections a server may hold: `share` of the budget beyond ``reserved``, at most 65,536, and at least
    /// an eighth of the whole budget (64 to 1,024): with a small budget that cannot be raised, the two servers
    /// together still leave the process most of its descriptors.
    public static func connections(share: Double, of budget: Int = current) -> Int {
        let available = max(0, budget - reserved)
        let floor = min(1_024, max(64, budget / 8))
        return min(65_536, max(floor, Int(Double(available) * min(max(share, 0), 1))))
    }
}
