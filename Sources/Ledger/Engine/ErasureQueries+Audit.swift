import Foundation
import LedgerDomain
import Vocabulary

/// The erasure's passes over the desk's audit: lines about the player (by the player column, or a member naming one of
/// their identifiers); and lines about no one that mention them (a lookup by transaction id names the order and player
/// it was granted to), rewritten last, only what names them, and only for a player the erasure found or erased before.
extension ErasureQueries {
    /// The audit lines the write pass may rewrite: about the player, or about no one and naming one of the
    /// identifiers `matcher` learned (as the write pass learns them). LIKE finds the lines holding an identifier
    /// anywhere (each as written and as JSON escapes it), a page at a time by id; only those the write pass would
    /// take count towards ``bound``. A short id (`7`) is inside most lines, and counted by LIKE alone it refused the
    /// erasure of a player whose own lines were few.
    static func auditCandidates(
        naming matcher: PlayerErasure, appName: String, in session: any SQLSession
    ) throws -> [Int64] {
        let spelling = session.spelling
        let userID = matcher.userID
        let identifiers = Set(matcher.replacements.keys).subtracting([""])
        var audit = Set<Int64>()
        // An OR of a thousand patterns is past SQLite's depth: 50 at a time.
        let patterns = Array(Set(identifiers.flatMap(storedForms(of:)))).sorted()
        for start in stride(from: 0, to: max(patterns.count, 1), by: 50) {
            let batch = Array(patterns[start..<min(start + 50, patterns.count)])
            let naming = batch.indices.map {
                "request LIKE ?\($0 + 4) ESCAPE '!' OR answer LIKE ?\($0 + 4) ESCAPE '!'"
            }
            var after = Int64.min
            while true {
                let page = try session.rows(
                    """
                    SELECT id, player, request, answer FROM \(spelling.table("desk_audit"))
                        WHERE app = ?1 AND id > ?3
                        AND (player = ?2\(naming.isEmpty ? "" : " OR " + naming.joined(separator: " OR ")))
                        ORDER BY id LIMIT 1000
                    """,
                    [.text(appName), .text(userID), .integer(after)]
                        + batch.map { .text("%" + likeLiteral($0) + "%") })
                for row in page {
                    let (request, answer) = (Array((row.text(2) ?? "").utf8), Array((row.text(3) ?? "").utf8))
                    let player = row.text(1) ?? ""
                    if player == userID || matcher.isAbout(request) || matcher.isAbout(answer)
                        || (player.isEmpty && (matcher.mentions(request) || matcher.mentions(answer)))
                    {
                        audit.insert(row.int64(0) ?? 0)
                    }
                }
                guard audit.count <= bound else { throw pastBound }
                guard page.count == 1000, let last = page.last?.int64(0) else { break }
                after = last
            }
        }
        return audit.sorted()
    }

    /// Rewrites the lines about the player; answers those about no one that mention them, for ``eraseMentions``.
    static func eraseAudit(
        _ erasure: inout PlayerErasure, _ candidates: Candidates, appName: String, apply: Bool,
        counts: inout ErasureCounts, in session: any SQLSession
    ) throws -> [(id: Int64, request: [UInt8], answer: [UInt8])] {
        let spelling = session.spelling
        let userID = erasure.userID
        let byPlayer = try bounded(
            session, "SELECT id FROM \(spelling.table("desk_audit")) WHERE app = ?1 AND player = ?2",
            [.text(appName), .text(userID)]
        ).compactMap { $0.int64(0) }
        var mentioning: [(id: Int64, request: [UInt8], answer: [UInt8])] = []
        for id in Set(candidates.audit + byPlayer).sorted() {
            guard
                let row = try session.first(
                    "SELECT player, request, answer FROM \(spelling.table("desk_audit")) WHERE id = ?1", [.integer(id)])
            else { continue }
            let (request, answer) = (Array((row.text(1) ?? "{}").utf8), Array((row.text(2) ?? "{}").utf8))
            guard row.text(0) == userID || erasure.isAbout(request) || erasure.isAbout(answer) else {
                // Another player's line stays whatever its text says; one about no one is the player's to erase from.
                if (row.text(0) ?? "").isEmpty && (erasure.mentions(request) || erasure.mentions(answer)) {
                    mentioning.append((id, request, answer))
                }
                continue
            }
            counts.audit += 1
            guard apply else { continue }
            let free = PlayerErasure.supportFreeText
            try session.rows(
                "UPDATE \(spelling.table("desk_audit")) SET player = ?2, request = ?3, answer = ?4 WHERE id = ?1",
                [
                    .integer(id), .optional(row.text(0).map { erasure.replacements[$0] ?? $0 }),
                    .text(String(decoding: erasure.json(request, freeText: free), as: UTF8.self)),
                    .text(String(decoding: erasure.json(answer, freeText: free), as: UTF8.self)),
                ])
        }
        return mentioning
    }

    /// Erases from the lines about no one what names the player, once the other passes found the player.
    static func eraseMentions(
        _ mentioning: [(id: Int64, request: [UInt8], answer: [UInt8])], _ erasure: PlayerErasure, app: AppScope,
        apply: Bool, counts: inout ErasureCounts, in session: any SQLSession
    ) throws {
        let spelling = session.spelling
        // Words alone never make a player: a mistyped id that only appears in someone's text erases nothing.
        guard try counts.total > 0 || erasedBefore(erasure.pseudonym, app: app, in: session) else { return }
        counts.auditMentions = mentioning.count
        guard apply else { return }
        for line in mentioning {
            try session.rows(
                "UPDATE \(spelling.table("desk_audit")) SET request = ?2, answer = ?3 WHERE id = ?1",
                [
                    .integer(line.id), .text(String(decoding: erasure.json(line.request), as: UTF8.self)),
                    .text(String(decoding: erasure.json(line.answer), as: UTF8.self)),
                ])
        }
    }

    /// Whether the player whose pseudonym this is was erased (and recorded) before.
    static func erasedBefore(_ pseudonym: String, app: AppScope, in session: any SQLSession) throws -> Bool {
        try session.first(
            "SELECT 1 FROM \(session.spelling.table("player_erasures")) WHERE app = ?1 AND pseudonym = ?2",
            [.text(app.rawValue), .text(pseudonym)]) != nil
    }
}
