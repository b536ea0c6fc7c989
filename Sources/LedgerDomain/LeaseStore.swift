public import Foundation

/// Leases: what must be done by one replica at a time (the sweep of Apple's notification history, the refund
/// requests answered by policy) is done by the holder of its lease. A lease ends at its time: a replica that
/// stopped holds nothing for long.
public protocol LeaseStore: Sendable {
    /// Takes lease `name` for `holder` until `until`, when it is free (never taken, or past its time at `now`) or
    /// `holder`'s already; the lease's state as its holders left it, nil when another holds it.
    func acquireLease(_ name: String, holder: String, until: Date, now: Date) async throws -> String?

    /// Keeps `state` with the lease (what its next holder needs), if `holder` still holds it.
    func recordLeaseState(_ name: String, holder: String, state: String) async throws

    /// When the ledger last handled a notification (nil: never): how long Apple has been silent.
    func newestNotificationHandled() async throws -> Date?
}
