public import Foundation
public import LedgerDomain
import Vocabulary

/// A player's erasure (``ErasureStore``) on either database: the rows that name the player found by the same
/// keys and scans as their export (``PlayerQueries``), each rewritten by ``PlayerErasure`` in one transaction.
enum ErasureQueries {
    /// At most this many rows of a kind are read for one erasure; past it the erasure is refused (a player with
    /// more is an operator's job to split, never a half-erased player).
    static let bound = 100_000

    static func targets(_ userID: String, app: AppScope, appName: String, in session: any SQLSession) throws
        -> ErasureTargets
    {
        let spelling = session.spelling
        var targets = ErasureTargets(userID: userID)
        let scope = SQLValue.text(app.rawValue)
        let grants = try session.rows(
            """
            SELECT environment, purchase_id, order_id FROM \(spelling.table("grants"))
                WHERE app = ?1 AND user_id = ?2 LIMIT ?3
            """, [scope, .text(userID), .integer(bound)])
        for row in grants {
            targets.orders.insert(row.text(2) ?? "")
            guard
                let reported = try session.first(
                    """
                    SELECT event FROM \(spelling.table("unclaimed_purchases"))
                        WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                    """, [scope, .text(row.text(0) ?? ""), .text(row.text(1) ?? "")]),
                let token = member("app_account_token", of: reported.bytes(0))
            else { continue }
            targets.tokens.insert(token.lowercased())
        }
        for row in try session.rows(
            """
            SELECT job_id, event FROM \(spelling.table("results"))
                WHERE app = ?1 AND \(spelling.eventMember("event", "user_id")) = ?2 LIMIT ?3
            """, [scope, .text(userID), .integer(bound)])
        {
            targets.jobIDs.insert(row.text(0) ?? "")
            if let order = member("order_id", of: row.bytes(1)) { targets.orders.insert(order) }
        }
        for row in try session.rows(
            """
            SELECT event FROM \(spelling.table("notifications"))
                WHERE \(spelling.eventMember("event", "user_id")) = ?1 LIMIT ?2
            """, [.text(userID), .integer(bound)])
        {
            if let order = member("order_id", of: row.bytes(0)) { targets.orders.insert(order) }
        }
        for row in try session.rows(
            "SELECT request FROM \(spelling.table("desk_approvals")) WHERE player = ?1 AND app = ?2",
            [.text(userID), .text(appName)])
        {
            if let order = member("order_id", of: row.bytes(0)) { targets.orders.insert(order) }
        }
        targets.orders.remove("")
        targets.jobIDs.remove("")
        return targets
    }

    /// Rewrites every row that names the player; with `apply` false, only counts them.
    static func erase(
        _ targets: ErasureTargets, _ erasure: PlayerErasure, app: AppScope, appName: String, bundleID: String,
        apply: Bool, in session: any SQLSession
    ) throws -> ErasureCounts {
        let spelling = session.spelling
        let scope = SQLValue.text(app.rawValue)
        let userID = targets.userID
        var counts = ErasureCounts()
        func rewritten(_ bytes: [UInt8]?, _ freeText: Set<String>) -> [UInt8]? {
            guard let bytes else { return nil }
            let changed = erasure.json(bytes, freeText: freeText)
            return changed == bytes ? nil : changed
        }

        // Grants: the player's, and every grant to one of their orders (a subscription's renewals), each by an
        // index (the player's; a job's order, a renewal's order: partial indexes, named by their predicates).
        let grantColumns = "SELECT environment, purchase_id, user_id, order_id, event FROM \(spelling.table("grants"))"
        var grantRows = try session.rows(grantColumns + " WHERE app = ?1 AND user_id = ?2", [scope, .text(userID)])
        for order in targets.orders.sorted() {
            for credit in ["job", "renewal"] {
                grantRows += try session.rows(
                    grantColumns + " WHERE app = ?1 AND order_id = ?2 AND credit = '\(credit)'", [scope, .text(order)])
            }
        }
        var reportedKeys: [(String, String)] = []
        var seen = Set<String>()
        for row in grantRows where seen.insert("\(row.text(0) ?? "")/\(row.text(1) ?? "")").inserted {
            let (environment, purchase) = (row.text(0) ?? "", row.text(1) ?? "")
            reportedKeys.append((environment, purchase))
            let user = row.text(2).map { erasure.replacements[$0] ?? $0 }
            let order = row.text(3).map { erasure.replacements[$0] ?? $0 } ?? ""
            let event = rewritten(row.bytes(4), PlayerErasure.eventFreeText)
            guard user != row.text(2) || order != row.text(3) || event != nil else { continue }
            counts.grants += 1
            guard apply else { continue }
            try session.rows(
                """
                UPDATE \(spelling.table("grants")) SET user_id = ?4, order_id = ?5\(event == nil ? "" : ", event = ?6")
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                """,
                [scope, .text(environment), .text(purchase), .optional(user), .text(order)]
                    + (event.map { [SQLValue.bytes($0)] } ?? []))
        }

        // Apple's reports of those purchases (the token in their events).
        for (environment, purchase) in reportedKeys {
            let keys: [SQLValue] = [scope, .text(environment), .text(purchase)]
            guard
                let row = try session.first(
                    """
                    SELECT event FROM \(spelling.table("unclaimed_purchases"))
                        WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                    """, keys),
                let event = rewritten(row.bytes(0), PlayerErasure.eventFreeText)
            else { continue }
            counts.reported += 1
            guard apply else { continue }
            try session.rows(
                """
                UPDATE \(spelling.table("unclaimed_purchases")) SET event = ?4
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                """, keys + [.bytes(event)])
        }

        // The answers to the player's jobs: their job ids, keys and events.
        for row in try session.rows(
            """
            SELECT job_id, fingerprint, event_key, event FROM \(spelling.table("results"))
                WHERE app = ?1 AND \(spelling.eventMember("event", "user_id")) = ?2
            """, [scope, .text(userID)])
        {
            let (job, fingerprint) = (row.text(0) ?? "", row.text(1) ?? "")
            counts.answers += 1
            guard apply else { continue }
            try session.rows(
                """
                UPDATE \(spelling.table("results")) SET job_id = ?4, event_key = ?5, event = ?6
                    WHERE app = ?1 AND job_id = ?2 AND fingerprint = ?3
                """,
                [
                    scope, .text(job), .text(fingerprint), .text(erasure.replacements[job] ?? job),
                    .optional(row.text(2).map { erasure.replacements[$0] ?? $0 }),
                    .bytes(erasure.json(row.bytes(3) ?? [], freeText: PlayerErasure.eventFreeText)),
                ])
        }

        // The events of notifications about the player's purchases, in this app.
        for row in try session.rows(
            """
            SELECT notification_id, event_key, event FROM \(spelling.table("notifications"))
                WHERE \(spelling.eventMember("event", "user_id")) = ?1
            """, [.text(userID)])
        {
            let named = member("bundle_id", of: row.bytes(2))
            guard named == nil || named == bundleID else { continue }
            counts.notices += 1
            guard apply else { continue }
            try session.rows(
                "UPDATE \(spelling.table("notifications")) SET event_key = ?2, event = ?3 WHERE notification_id = ?1",
                [
                    .text(row.text(0) ?? ""), .optional(row.text(1).map { erasure.replacements[$0] ?? $0 }),
                    .bytes(erasure.json(row.bytes(2) ?? [], freeText: PlayerErasure.eventFreeText)),
                ])
        }

        // The desk's audit lines about the player, or naming any of their identifiers, in this app.
        let identifiers = Array(erasure.replacements.keys)
        let naming = identifiers.indices.map { "request LIKE ?\($0 + 3) OR answer LIKE ?\($0 + 3)" }
        for row in try session.rows(
            """
            SELECT id, player, request, answer FROM \(spelling.table("desk_audit"))
                WHERE app = ?1 AND (player = ?2\(naming.isEmpty ? "" : " OR " + naming.joined(separator: " OR ")))
            """, [.text(appName), .text(userID)] + identifiers.map { .text("%" + $0 + "%") })
        {
            let own = row.text(1) == userID
            let freeText = own ? PlayerErasure.supportFreeText : []
            let request = erasure.text(row.text(2) ?? "{}", freeText: freeText)
            let answer = erasure.text(row.text(3) ?? "{}", freeText: freeText)
            guard own || request != row.text(2) || answer != row.text(3) else { continue }
            counts.audit += 1
            guard apply else { continue }
            try session.rows(
                "UPDATE \(spelling.table("desk_audit")) SET player = ?2, request = ?3, answer = ?4 WHERE id = ?1",
                [
                    .integer(row.int64(0) ?? 0), .optional(own ? erasure.pseudonym : row.text(1)), .text(request),
                    .text(answer),
                ])
        }

        // Credits held for the player, and the cap each day counted for them.
        for row in try session.rows(
            "SELECT id, request FROM \(spelling.table("desk_approvals")) WHERE player = ?1 AND app = ?2",
            [.text(userID), .text(appName)])
        {
            counts.heldCredits += 1
            guard apply else { continue }
            try session.rows(
                "UPDATE \(spelling.table("desk_approvals")) SET player = ?2, request = ?3 WHERE id = ?1",
                [
                    .integer(row.int64(0) ?? 0), .text(erasure.pseudonym),
                    .text(erasure.text(row.text(1) ?? "{}", freeText: PlayerErasure.supportFreeText)),
                ])
        }
        let capsKey = "\(appName)/\(userID)"
        counts.caps =
            try session.first(
                "SELECT COUNT(*) FROM \(spelling.table("desk_daily_use")) WHERE kind = 'player' AND who = ?1",
                [.text(capsKey)])?.int(0) ?? 0
        if apply && counts.caps > 0 {
            try session.rows(
                "UPDATE \(spelling.table("desk_daily_use")) SET who = ?2 WHERE kind = 'player' AND who = ?1",
                [.text(capsKey), .text("\(appName)/\(erasure.pseudonym)")])
        }
        return counts
    }

    static func record(
        app: AppScope, pseudonym: String, by: String, counts: ErasureCounts, in session: any SQLSession
    ) throws {
        let spelling = session.spelling
        let text = "{" + counts.fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
        guard
            try session.first(
                "SELECT 1 FROM \(spelling.table("player_erasures")) WHERE app = ?1 AND pseudonym = ?2",
                [.text(app.rawValue), .text(pseudonym)]) == nil
        else { return }
        try session.rows(
            """
            INSERT INTO \(spelling.table("player_erasures")) (app, pseudonym, erased_at, erased_by, counts)
                VALUES (?1, ?2, \(spelling.now), ?3, ?4)
            """, [.text(app.rawValue), .text(pseudonym), .text(by), .text(text)])
    }

    /// A string member of a JSON document, nil when absent or not JSON.
    static func member(_ name: String, of bytes: [UInt8]?) -> String? {
        guard let bytes, let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
            return nil
        }
        return object[name] as? String
    }

}

extension LedgerEngine: ErasureStore {
    public func erasureTargets(_ userID: String, app: AppScope, appName: String) async throws -> ErasureTargets {
        try await dialect.read { try ErasureQueries.targets(userID, app: app, appName: appName, in: $0) }
    }

    public func erase(
        _ targets: ErasureTargets, _ erasure: PlayerErasure, app: AppScope, appName: String, bundleID: String,
        by: String, dryRun: Bool
    ) async throws -> ErasureCounts {
        if dryRun {
            return try await dialect.read {
                try ErasureQueries.erase(
                    targets, erasure, app: app, appName: appName, bundleID: bundleID, apply: false, in: $0)
            }
        }
        return try await dialect.write { session in
            let counts = try ErasureQueries.erase(
                targets, erasure, app: app, appName: appName, bundleID: bundleID, apply: true, in: session)
            try ErasureQueries.record(app: app, pseudonym: erasure.pseudonym, by: by, counts: counts, in: session)
            return counts
        }
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
