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
    /// The studio's erasure key: 32 random bytes, checked to make a MAC before anything is erased.
    public struct ErasureKey: Sendable {
        let bytes: [UInt8]

        /// Nil when OpenSSL cannot make a MAC with it.
        public init?(_ bytes: [UInt8]) {
            guard HMACSHA256.mac(key: bytes, Array("check".utf8)) != nil else { return nil }
            self.bytes = bytes
        }

        /// HMAC-SHA-256(key, kind, app, value): `erased-` and 24 hex digits; an app account token's as a UUID
        /// (version 8, from the MAC), so that an event carrying it still carries a UUID.
        func pseudonym(_ kind: PlayerErasure.Kind, app: AppScope, _ value: String) -> String {
            let message = Array("\(kind.rawValue)\u{0}\(app.rawValue)\u{0}\(value)".utf8)
            // Checked at init; were OpenSSL to fail later, a keyed SHA-256 stands in (still the key's alone).
            let mac = HMACSHA256.mac(key: bytes, message) ?? SHA256Digest.hash(bytes + message)
            guard kind == .token else { return "erased-" + Hex.encode(mac).prefix(24) }
            var uuid = Array(mac.prefix(16))
            uuid[6] = (uuid[6] & 0x0F) | 0x80
            uuid[8] = (uuid[8] & 0x3F) | 0x80
            let hex = Hex.encode(uuid)
            return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
                String(
                    hex[
                        hex.index(
                            hex.startIndex, offsetBy: range.lowerBound)..<hex.index(
                                hex.startIndex, offsetBy: range.upperBound)])
            }.joined(separator: "-")
        }
    }

    public enum ErasureOutcome: Sendable {
        /// What an erasure would rewrite (nothing written, nothing published).
        case dryRun(ErasureCounts, pseudonym: String)
        /// Erased now, or before: `event` is to publish (then ``markPublished``), nil when it was published before.
        case erased(ErasureCounts, pseudonym: String, event: StoredEvent?)
        /// Nothing changed, and why (a credit waiting for a lead, a player the ledger knows nothing of).
        case refused(String)
    }

    /// Erases the player `userID` of `app` (or, `dryRun`, counts what it would), recorded under `by`. A player the
    /// ledger holds nothing of, and never erased, is refused: no event tells grant services to erase someone by
    /// mistake.
    public static func erase(
        userID: String, app: App, key: ErasureKey, ledger: any ErasureStore, by: String, dryRun: Bool,
        now: Date = Date()
    ) async throws -> ErasureOutcome {
        let scope = app.scope
        let counts: ErasureCounts
        let pseudonym: String
        do {
            (counts, pseudonym) = try await ledger.erase(
                userID, app: scope, appName: app.name, bundleID: app.bundleID, by: by, dryRun: dryRun,
                pseudonym: { key.pseudonym($0, app: scope, $1) }, digest: { SHA256Digest.hex(Array($0.utf8)) })
        } catch let refused as ErasureRefused {
            return .refused(refused.description)
        }
        let record: ErasureRecord?
        do {
            record = try await ledger.erasureRecord(app: scope, pseudonym: pseudonym)
        } catch  where !dryRun && counts.total > 0 {
            // Erased now (committed) though its record cannot be read back: said, and its event made, all the same.
            record = nil
        }
        if counts.total == 0 && record == nil {
            return .refused("the ledger holds nothing about this player in app \(app.name): nothing erased")
        }
        if dryRun { return .dryRun(counts, pseudonym: pseudonym) }
        let event =
            record?.publishedAt == nil
            ? PlayerErasedEvent.make(
                userID: userID, pseudonym: pseudonym, app: scope, bundleID: app.bundleID,
                at: record?.erasedAt ?? now)
            : nil
        return .erased(counts, pseudonym: pseudonym, event: event)
    }

    /// The erasure's event was taken by the broker: not published again by a later run.
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
