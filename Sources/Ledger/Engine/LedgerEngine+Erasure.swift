public import Foundation
public import LedgerDomain
import Vocabulary

/// The erasure's record: a player erased, by pseudonym only (never the erased values), and when its event was
/// published.
extension ErasureQueries {
    static func record(
        app: AppScope, pseudonym: String, by: String, counts: ErasureCounts, in session: any SQLSession
    ) throws {
        let spelling = session.spelling
        let text = "{" + counts.fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
        guard try !erasedBefore(pseudonym, app: app, in: session) else { return }
        try session.rows(
            """
            INSERT INTO \(spelling.table("player_erasures")) (app, pseudonym, erased_at, erased_by, counts)
                VALUES (?1, ?2, \(spelling.now), ?3, ?4)
            """, [.text(app.rawValue), .text(pseudonym), .text(by), .text(text)])
    }
}

extension LedgerEngine: ErasureStore {
    public func erase(
        _ userID: String, app: AppScope, appName: String, bundleID: String, by: String, dryRun: Bool,
        pseudonym: @escaping @Sendable (PlayerErasure.Kind, String) -> String,
        digest: @escaping @Sendable (String) -> String
    ) async throws -> (ErasureCounts, pseudonym: String) {
        let candidates = try await dialect.read {
            try ErasureQueries.candidates(
                for: PlayerErasure(userID: userID, pseudonym: pseudonym, digest: digest), app: app, appName: appName,
                in: $0)
        }
        let body: @Sendable (any SQLSession) throws -> (ErasureCounts, String) = { session in
            var erasure = PlayerErasure(userID: userID, pseudonym: pseudonym, digest: digest)
            let counts = try ErasureQueries.erase(
                &erasure, candidates, app: app, appName: appName, bundleID: bundleID, apply: !dryRun, in: session)
            if !dryRun && counts.total > 0 {
                try ErasureQueries.record(
                    app: app, pseudonym: erasure.pseudonym, by: by, counts: counts, in: session)
            }
            return (counts, erasure.pseudonym)
        }
        return dryRun ? try await dialect.read(body) : try await dialect.write(body)
    }

    public func erasureRecord(app: AppScope, pseudonym: String) async throws -> ErasureRecord? {
        try await dialect.read { session in
            try session.first(
                """
                SELECT \(session.spelling.readTime("erased_at")), erased_by, \(session.spelling.readTime("published_at"))
                    FROM \(session.spelling.table("player_erasures")) WHERE app = ?1 AND pseudonym = ?2
                """, [.text(app.rawValue), .text(pseudonym)]
            ).map {
                ErasureRecord(
                    erasedAt: $0.time(0) ?? Date(timeIntervalSince1970: 0), erasedBy: $0.text(1) ?? "",
                    publishedAt: $0.time(2))
            }
        }
    }

    public func markErasurePublished(app: AppScope, pseudonym: String, at: Date) async throws {
        _ = try await dialect.write { session in
            try session.rows(
                """
                UPDATE \(session.spelling.table("player_erasures")) SET published_at = \(session.spelling.time(3))
                    WHERE app = ?1 AND pseudonym = ?2 AND published_at IS NULL
                """, [.text(app.rawValue), .text(pseudonym), .time(at)])
        }
    }
}
