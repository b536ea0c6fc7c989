package import Foundation
import LedgerDomain
import Observability

extension LeaseStore {
    /// Takes lease `name` for a round of work done every `interval` by one replica (the sweep, the status checks,
    /// the answers by policy): held for an interval and a half, so its holder keeps it at its next round and, once
    /// stopped, leaves it to another replica half an interval later. The lease's state; nil when another holds it.
    package func acquireLease(_ name: String, holder: String, roundsEvery interval: Duration, now: Date) async throws
        -> String?
    {
        try await acquireLease(name, holder: holder, until: now.addingTimeInterval(interval.inSeconds * 1.5), now: now)
    }
}
