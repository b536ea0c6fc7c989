public import Foundation

/// A player's erasure in the ledger (``PlayerErasure``): first the identifiers the ledger holds of them, then, in
/// one write transaction, every row that names them rewritten and the erasure recorded (without the erased values:
/// by the player's pseudonym). Deterministic pseudonyms make it safe to run again: what was erased no longer
/// names the player; what a job wrote since is erased this time.
public protocol ErasureStore: Sendable {
    /// Rewrites every row of `app` (`appName` the desk's name of it) that names the player `userID` by
    /// ``PlayerErasure`` with the caller's pseudonyms and token digests, and records the erasure (`by`, the
    /// counts) unless nothing named the player or it was recorded before; `dryRun` counts what would change and
    /// writes nothing. Throws ``ErasureRefused`` (nothing changed) for a player with a credit waiting for a lead,
    /// or more rows of a kind than one erasure takes.
    func erase(
        _ userID: String, app: AppScope, appName: String, bundleID: String, by: String, dryRun: Bool,
        pseudonym: @escaping @Sendable (PlayerErasure.Kind, String) -> String,
        digest: @escaping @Sendable (String) -> String
    ) async throws -> (ErasureCounts, pseudonym: String)

    /// The erasure of the player whose pseudonym is `pseudonym`, once recorded.
    func erasureRecord(app: AppScope, pseudonym: String) async throws -> ErasureRecord?

    /// Its `player.erased` event was published (taken by the broker): not published again.
    func markErasurePublished(app: AppScope, pseudonym: String, at: Date) async throws
}

/// An erasure refused before anything changed, and why.
public struct ErasureRefused: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// How many rows of each kind an erasure rewrote (or would).
public struct ErasureCounts: Sendable, Equatable {
    public var grants = 0
    public var answers = 0
    public var notices = 0
    public var reported = 0
    public var audit = 0
    public var heldCredits = 0
    public var caps = 0
    /// Audit lines about no one whose text named the player (a lookup by transaction id): rewritten only when the
    /// erasure found the player's own rows, or erased them before, so not in ``total``.
    public var auditMentions = 0

    public init() {}

    /// The rows that are the player's: none, and the player is unknown to the ledger.
    public var total: Int { grants + answers + notices + reported + audit + heldCredits + caps }

    /// As the audit and the command line say it.
    public var fields: [(String, Int)] {
        [
            ("grants", grants), ("answers", answers), ("notices", notices), ("reported_purchases", reported),
            ("audit", audit), ("audit_mentions", auditMentions), ("held_credits", heldCredits), ("caps", caps),
        ]
    }
}

/// An erasure as the ledger recorded it.
public struct ErasureRecord: Sendable, Equatable {
    public var erasedAt: Date
    public var erasedBy: String
    public var publishedAt: Date?

    public init(erasedAt: Date, erasedBy: String, publishedAt: Date?) {
        self.erasedAt = erasedAt
        self.erasedBy = erasedBy
        self.publishedAt = publishedAt
    }
}
