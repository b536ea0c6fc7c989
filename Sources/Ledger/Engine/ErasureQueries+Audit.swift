import Foundation
import LedgerDomain
import Vocabulary

/// The erasure's passes over the desk's audit: lines about the player (by the player column, or a member naming one of
/// their identifiers); and lines about no one that mention them (a lookup by transaction id names the order and player
/// it was granted to), rewritten last, only what names them, and only for a player the erasure found or erased before.
extension ErasureQueries {
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
