import Foundation
import Vocabulary

/// A ledger failure: the decision was not stored. Retried, unless `isPermanent`: the database refuses the
/// values themselves (too long for an index, invalid text), which no retry will change.
public struct LedgerError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The database does not answer, refuses connections, or answered an error that can heal.
        public static let unavailable = Code("unavailable")
        /// The database refuses the values themselves: permanent.
        public static let valueRefused = Code("value_refused")
        /// Another writer decided the same job meanwhile: the retry finds its answer.
        public static let conflict = Code("conflict")
        /// The ledger's file was deleted or replaced under the worker.
        public static let replaced = Code("replaced")
        /// The ledger is closed.
        public static let closed = Code("closed")
        /// `ledger.url` or `ledger.schema` is not usable: a configuration error.
        public static let misconfigured = Code("misconfigured")
        /// The schema lacks migrations this role may not apply, or that this worker was told not to apply
        /// (`ledger.migrate_on_start=false`): waited for.
        public static let notMigrated = Code("not_migrated")
        /// A migration failed with the server answering (a lock never granted, a statement refused).
        public static let migrationFailed = Code("migration_failed")
    }

    public let code: Code
    public let reason: String
    /// The configuration key the error is about, when it is one (`ledger.url`).
    public let key: String?
    /// PostgreSQL's SQLSTATE, when the server answered one.
    public var sqlstate: String? = nil

    public var isPermanent: Bool { code == .valueRefused }

    public init(_ code: Code, _ reason: String, key: String? = nil) {
        self.code = code
        self.reason = reason
        self.key = key
    }

    public var description: String { "ledger: \(reason)" }

    /// The ledger records its default app's bundle id; opened with another `apple.bundle_id`, the default app's
    /// history would be read as another app's, and its purchases could be granted again (both ledgers refuse).
    package static func defaultAppMismatch(recorded: String, configured: String) -> LedgerError {
        LedgerError(
            .misconfigured,
            "this ledger's default app is \(recorded), and apple.bundle_id is \(configured): the default app's"
                + " purchases would be another app's (set apple.bundle_id=\(recorded), or use another ledger)",
            key: "apple.bundle_id")
    }
}
