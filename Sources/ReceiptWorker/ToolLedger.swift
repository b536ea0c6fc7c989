import Flows
public import Foundation
public import Ledger

extension WorkerConfiguration {
    /// The cutoffs of the ledger's retention as configured, from now (nil: that kind is kept), for the worker's
    /// hourly prune and `ledger prune`.
    public func retention(now: Date = Date()) -> Retention {
        func cutoff(_ days: Int) -> Date? { days > 0 ? now.addingTimeInterval(-Double(days) * 86_400) : nil }
        return Retention(
            notificationsBefore: cutoff(notificationsRetentionDays), settledBefore: cutoff(settledRetentionDays))
    }

    /// How long a command waits for its ledger before it gives up (exit 1, saying so): a person is waiting.
    public static let toolLedgerPatience = Duration.seconds(20)

    /// Runs `body` on the configured ledger opened for a command's single task (one connection), and closes it
    /// whether `body` returns or throws. A ledger that does not answer within ``toolLedgerPatience`` (refused
    /// connections, a server that accepts and says nothing) is an error, never a wait for ever.
    ///
    /// A command never migrates (a schema that lacks migrations is refused: run `ledger migrate`), and never
    /// makes a new SQLite file (a mistyped path would be an empty ledger, and a credit in it a second grant), but
    /// `accept-offsets`, whose ledger may be new on purpose (`newLedgerAllowed`: made and migrated).
    public func withToolLedger<T: Sendable>(newLedgerAllowed: Bool = false, _ body: (any Ledger) async throws -> T)
        async throws -> T
    {
        let patience = Self.toolLedgerPatience
        let (url, schema, bundleID) = (ledgerURL, ledgerSchema, defaultApp.bundleID.isEmpty ? nil : defaultApp.bundleID)
        if url.hasPrefix("sqlite:"), url != "sqlite::memory:", !newLedgerAllowed,
            !FileManager.default.fileExists(atPath: String(url.dropFirst("sqlite:".count)))
        {
            throw LedgerError(
                .misconfigured, "ledger.url names no ledger file (\(url.dropFirst("sqlite:".count))): check the path",
                key: "ledger.url")
        }
        let ledger = try await Deadline.within(
            patience, else: LedgerError(.unavailable, "the ledger did not answer within \(patience)")
        ) {
            try await LedgerFactory.open(
                url: url, poolSize: 1, schema: schema, defaultBundleID: bundleID, migrate: newLedgerAllowed,
                giveUpAfter: patience)
        }
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
