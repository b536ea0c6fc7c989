import Crypto
import Events
public import Foundation
public import LedgerDomain
public import Vocabulary

/// A player erased (GDPR article 17, the CCPA's right to delete), the claims kept: their identifiers in the ledger
/// replaced by keyed pseudonyms (``PlayerErasure``: HMAC-SHA-256 with the studio's key, `privacy.erasure_key_file`,
/// so the same player erased twice gets the same pseudonym and nobody without the key can tell who it was), the
/// erasure recorded without the erased values, and a `player.erased` event for the grant services, published once.
/// Safe to run again after a crash at any point: what was erased no longer names the player; an erasure recorded
/// whose event the broker did not take publishes it then.
extension PlayerData {
    /// The studio's erasure key: 32 random bytes.
    public struct ErasureKey: Sendable {
        let bytes: [UInt8]
        public init(_ bytes: [UInt8]) { self.bytes = bytes }

        /// `erased-` and 24 hex digits of HMAC-SHA-256(key, kind, app, value).
        func pseudonym(_ kind: String, app: AppScope, _ value: String) -> String {
            let message = Array("\(kind)\u{0}\(app.rawValue)\u{0}\(value)".utf8)
            return "erased-" + Hex.encode(HMACSHA256.mac(key: bytes, message)).prefix(24)
        }
    }

    public enum ErasureOutcome: Sendable {
        /// What an erasure would rewrite (nothing written, nothing published).
        case dryRun(ErasureCounts, pseudonym: String)
        /// Erased now, or before: `event` is to publish (then ``markPublished``), nil when it was published before.
        case erased(ErasureCounts, pseudonym: String, event: StoredEvent?)
    }

    /// The player's identifiers and their pseudonyms, for the rule.
    static func erasure(_ targets: ErasureTargets, key: ErasureKey, app: AppScope) -> PlayerErasure {
        let pseudonym = key.pseudonym("user", app: app, targets.userID)
        var replacements = [targets.userID: pseudonym]
        for order in targets.orders { replacements[order] = key.pseudonym("order", app: app, order) }
        for job in targets.jobIDs where replacements[job] == nil {
            replacements[job] = key.pseudonym("job", app: app, job)
        }
        for token in targets.tokens {
            let replaced = key.pseudonym("token", app: app, token)
            replacements[token] = replaced
            // The audit of a credit keeps a token's SHA-256 (never the token): the same token, linked the same.
            replacements[SHA256Digest.hex(Array(token.utf8))] = replaced
        }
        return PlayerErasure(pseudonym: pseudonym, replacements: replacements)
    }

    /// Erases the player `userID` of `app` (or, `dryRun`, counts what it would), recorded under `by`.
    public static func erase(
        userID: String, app: App, key: ErasureKey, ledger: any ErasureStore, by: String, dryRun: Bool,
        now: Date = Date()
    ) async throws -> ErasureOutcome {
        let targets = try await ledger.erasureTargets(userID, app: app.scope, appName: app.name)
        let erasure = erasure(targets, key: key, app: app.scope)
        let counts = try await ledger.erase(
            targets, erasure, app: app.scope, appName: app.name, bundleID: app.bundleID, by: by, dryRun: dryRun)
        if dryRun { return .dryRun(counts, pseudonym: erasure.pseudonym) }
        let record = try await ledger.erasureRecord(app: app.scope, pseudonym: erasure.pseudonym)
        let event =
            record?.publishedAt == nil
            ? PlayerErasedEvent.make(
                userID: userID, pseudonym: erasure.pseudonym, app: app.scope, bundleID: app.bundleID,
                at: record?.erasedAt ?? now)
            : nil
        return .erased(counts, pseudonym: erasure.pseudonym, event: event)
    }

    /// The erasure's event was taken by the broker: never published again.
    public static func markPublished(pseudonym: String, app: App, ledger: any ErasureStore, at: Date = Date())
        async throws
    {
        try await ledger.markErasurePublished(app: app.scope, pseudonym: pseudonym, at: at)
    }

    /// What an erasure did, for the audit and the command line: the counts, never the erased values.
    public static func erasureSummary(_ counts: ErasureCounts) -> JSONValue {
        .object(Dictionary(uniqueKeysWithValues: counts.fields.map { ($0.0, JSONValue($0.1)) }))
    }
}
