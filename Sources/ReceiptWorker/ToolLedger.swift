import Foundation
import Ledger

extension WorkerConfiguration {
    /// The cutoffs of the ledger's retention as configured, from now (nil: that kind is kept), for the worker's
    /// hourly prune and `ledger prune`.
    public func retention(now: Date = Date()) -> Retention {
        func cutoff(_ days: Int) -> Date? { days > 0 ? now.addingTimeInterval(-Double(days) * 86_400) : nil }
        return Retention(
            notificationsBefore: cutoff(notificationsRetentionDays), settledBefore: cutoff(settledRetentionDays))
    }

    /// Runs `body` on the configured ledger opened for a command's single task (one connection), and closes it
    /// whether `body` returns or throws.
    public func withToolLedger<T: Sendable>(_ body: (any Ledger) async throws -> T) async throws -> T {
        let ledger = try await LedgerFactory.open(
            url: ledgerURL, poolSize: 1, schema: ledgerSchema,
            defaultBundleID: apple.bundleID.isEmpty ? nil : apple.bundleID)
        do {
            let result = try await body(ledger)
            await ledger.close()
            return result
        } catch {
            await ledger.close()
            throw error
        }
    }
}
