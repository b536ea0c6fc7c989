// The ledger's value types and the stores' protocols (LedgerDomain): for every file of the ledger, and for
// whoever opens one.
@_exported import LedgerDomain

/// Opens the ledger a `ledger.url` names: `sqlite:PATH` (`sqlite::memory:` for a ledger in memory) or
/// `postgresql://...`.
public enum LedgerFactory {
    /// `schema`: the PostgreSQL schema of the ledger's tables (`ledger.schema`); SQLite has none.
    /// `defaultBundleID`: the default app's bundle id (`apple.bundle_id`), recorded in the ledger on first use:
    /// opened with another, the ledger is refused (its default app's rows would be read as another app's).
    /// `giveUpAfter`: a command's bound on reaching PostgreSQL (nil: wait as long as it takes, as a worker does).
    public static func open(
        url: String, poolSize: Int = 8, schema: String = PostgresSchema.defaultName, defaultBundleID: String? = nil,
        migrate: Bool = true, giveUpAfter: Duration? = nil
    ) async throws -> any Ledger {
        if url.hasPrefix("sqlite:") {
            return try LedgerEngine.sqlite(
                path: String(url.dropFirst("sqlite:".count)), defaultBundleID: defaultBundleID)
        }
        if url.hasPrefix("postgresql://") || url.hasPrefix("postgres://") {
            guard let schema = PostgresSchema(name: schema, defaultBundleID: defaultBundleID) else {
                throw LedgerError(
                    .misconfigured, "ledger.schema must be a lower-case SQL name (a-z, 0-9, _)", key: "ledger.schema")
            }
            return LedgerEngine(
                dialect: try await PostgresDialect(
                    url: url, poolSize: poolSize, schema: schema, migrate: migrate, giveUpAfter: giveUpAfter))
        }
        throw LedgerError(.misconfigured, "ledger.url must start with sqlite: or postgresql://", key: "ledger.url")
    }
}
