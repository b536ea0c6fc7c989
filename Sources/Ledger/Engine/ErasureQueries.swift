import Foundation
import LedgerDomain
import Vocabulary

/// A player's erasure (``ErasureStore``) on either database, in two passes: a read finds the rows of the scans that
/// may name the player (answers, notifications' events, audit lines: their keys), then one write transaction reads
/// the player's rows again by their indexes and those keys, learns every identifier of the player from them, and
/// rewrites each row that names the player by ``PlayerErasure``. The write holds no scan: a SQLite ledger's writers
/// wait for keyed reads and updates only.
enum ErasureQueries {
    /// At most this many rows of a kind for one player; past it the erasure is refused, never half done.
    static let bound = 100_000

    /// The keys of the scanned rows that may name the player.
    struct Candidates: Sendable {
        var answers: [(job: String, fingerprint: String)] = []
        var notices: [String] = []
        var audit: [Int64] = []
    }

    /// The read pass: the scans' candidates, and the audit lines naming any identifier the write pass will learn
    /// (learned here the same way, from the same rows: ``learn(_:answers:app:appName:in:)``).
    static func candidates(
        for erasure: PlayerErasure, app: AppScope, appName: String, in session: any SQLSession
    ) throws -> Candidates {
        let spelling = session.spelling
        let userID = erasure.userID
        var found = Candidates()
        for row in try bounded(
            session,
            """
            SELECT job_id, fingerprint FROM \(spelling.table("results"))
                WHERE app = ?1 AND \(spelling.eventMember("event", "user_id")) = ?2
            """, [.text(app.rawValue), .text(userID)])
        {
            found.answers.append((row.text(0) ?? "", row.text(1) ?? ""))
        }
        found.notices = try bounded(
            session,
            """
            SELECT notification_id FROM \(spelling.table("notifications"))
                WHERE \(spelling.eventMember("event", "user_id")) = ?1
            """, [.text(userID)]
        ).map { $0.text(0) ?? "" }
        var matcher = erasure
        _ = try learn(&matcher, answers: found.answers, app: app, appName: appName, in: session)
        found.audit = try auditCandidates(naming: matcher, appName: appName, in: session)
        return found
    }

    /// The player's own rows, and every identifier of theirs learned from them (into `erasure`): their grants'
    /// orders, their answers' jobs and orders, their held credits' orders and tokens, the tokens of Apple's reports
    /// of their purchases. Refused while a credit for the player waits for a lead or is being approved.
    static func learn(
        _ erasure: inout PlayerErasure, answers candidates: [(job: String, fingerprint: String)], app: AppScope,
        appName: String, in session: any SQLSession
    ) throws -> Learned {
        let spelling = session.spelling
        let scope = SQLValue.text(app.rawValue)
        let userID = erasure.userID
        var learned = Learned()
        learned.held = try bounded(
            session,
            "SELECT id, request, status, outcome FROM \(spelling.table("desk_approvals")) WHERE player = ?1 AND app = ?2",
            [.text(userID), .text(appName)])
        // Read before the grants (each statement sees its own moment): a hold waiting or being approved at this read
        // refuses the erasure, so no approval's grant is recorded between the two reads; a hold made after this
        // read is approved later still, after the erasure, as a job's grant racing it would be.
        // Waiting, or being approved now (a lead's call to Apple in flight would record a grant naming the player
        // after the erasure): refused until it ends.
        if learned.held.contains(where: { ["pending", "approving"].contains($0.text(2)) }) {
            throw ErasureRefused(
                "a credit for the player waits for a lead's decision, or is being approved: a lead approves or rejects"
                    + " it first (one whose approval stalled is in the leads' list after 5 minutes)")
        }
        for row in learned.held {
            erasure.learn(.order, member("order_id", of: row.bytes(1)))
            erasure.learn(.token, member("app_account_token", of: row.bytes(1))?.lowercased())
        }
        let grantColumns = "SELECT environment, purchase_id, user_id, order_id, event FROM \(spelling.table("grants"))"
        learned.grants = try bounded(
            session, grantColumns + " WHERE app = ?1 AND user_id = ?2", [scope, .text(userID)])
        for row in learned.grants { erasure.learn(.order, row.text(3)) }
        for candidate in candidates {
            guard
                let row = try session.first(
                    """
                    SELECT event_key, event FROM \(spelling.table("results"))
                        WHERE app = ?1 AND job_id = ?2 AND fingerprint = ?3
                    """, [scope, .text(candidate.job), .text(candidate.fingerprint)]),
                member("user_id", of: row.bytes(1)) == userID
            else { continue }
            erasure.learn(.job, candidate.job)
            erasure.learn(.order, member("order_id", of: row.bytes(1)))
            learned.answers.append((candidate.job, candidate.fingerprint, row.text(0), row.bytes(1) ?? []))
        }
        // A job's grant and a renewal's to one of the player's orders, unless another player's.
        for order in erasure.replacements.keys where order != userID {
            for credit in ["job", "renewal"] {
                learned.grants += try session.rows(
                    grantColumns
                        + " WHERE app = ?1 AND order_id = ?2 AND credit = '\(credit)' AND (user_id IS NULL OR user_id = ?3)",
                    [scope, .text(order), .text(userID)])
            }
        }
        var seen = Set<String>()
        learned.grants = learned.grants.filter { seen.insert("\($0.text(0) ?? "")/\($0.text(1) ?? "")").inserted }
        for row in learned.grants {
            let keys: [SQLValue] = [scope, .text(row.text(0) ?? ""), .text(row.text(1) ?? "")]
            guard
                let report = try session.first(
                    """
                    SELECT event FROM \(spelling.table("unclaimed_purchases"))
                        WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                    """, keys), let event = report.bytes(0)
            else { continue }
            erasure.learn(.token, member("app_account_token", of: event)?.lowercased())
            learned.reported.append((row.text(0) ?? "", row.text(1) ?? "", event))
        }

        return learned
    }

    /// What ``learn(_:answers:app:appName:in:)`` read of the player's own rows, for the write pass to rewrite.
    struct Learned {
        var grants: [SQLRow] = []
        var answers: [(job: String, fingerprint: String, key: String?, event: [UInt8])] = []
        var held: [SQLRow] = []
        var reported: [(environment: String, purchase: String, event: [UInt8])] = []
    }

    /// The write pass (with `apply` false, a count of what it would rewrite).
    static func erase(
        _ erasure: inout PlayerErasure, _ candidates: Candidates, app: AppScope, appName: String, bundleID: String,
        apply: Bool, in session: any SQLSession
    ) throws -> ErasureCounts {
        let spelling = session.spelling
        let scope = SQLValue.text(app.rawValue)
        let userID = erasure.userID
        var counts = ErasureCounts()
        // Learn first, from the player's own rows, read again in this transaction.
        let learned = try learn(&erasure, answers: candidates.answers, app: app, appName: appName, in: session)
        let (grants, answers, held, reported) = (learned.grants, learned.answers, learned.held, learned.reported)

        // Then rewrite.
        for row in grants {
            let user = row.text(2).map { erasure.replacements[$0] ?? $0 }
            let order = row.text(3).map { erasure.replacements[$0] ?? $0 } ?? ""
            let event = row.bytes(4).map { erasure.json($0, freeText: PlayerErasure.eventFreeText) }
            counts.grants += 1
            guard apply else { continue }
            try session.rows(
                """
                UPDATE \(spelling.table("grants")) SET user_id = ?4, order_id = ?5\(event == nil ? "" : ", event = ?6")
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                """,
                [scope, .text(row.text(0) ?? ""), .text(row.text(1) ?? ""), .optional(user), .text(order)]
                    + (event.map { [SQLValue.bytes($0)] } ?? []))
        }
        for report in reported {
            counts.reported += 1
            guard apply else { continue }
            try session.rows(
                """
                UPDATE \(spelling.table("unclaimed_purchases")) SET event = ?4
                    WHERE app = ?1 AND environment = ?2 AND purchase_id = ?3
                """,
                [
                    scope, .text(report.environment), .text(report.purchase),
                    .bytes(erasure.json(report.event, freeText: PlayerErasure.eventFreeText)),
                ])
        }
        for answer in answers {
            counts.answers += 1
            guard apply else { continue }
            let job = erasure.replacements[answer.job] ?? answer.job
            let keys: [SQLValue] = [scope, .text(answer.job), .text(answer.fingerprint)]
            // The same job's answer erased before (a job re-delivered since): the one kept is that one.
            if try session.first(
                "SELECT 1 FROM \(spelling.table("results")) WHERE app = ?1 AND job_id = ?2 AND fingerprint = ?3",
                [scope, .text(job), .text(answer.fingerprint)]) != nil
            {
                try session.rows(
                    "DELETE FROM \(spelling.table("results")) WHERE app = ?1 AND job_id = ?2 AND fingerprint = ?3",
                    keys)
                continue
            }
            try session.rows(
                """
                UPDATE \(spelling.table("results")) SET job_id = ?4, event_key = ?5, event = ?6
                    WHERE app = ?1 AND job_id = ?2 AND fingerprint = ?3
                """,
                keys + [
                    .text(job), .optional(answer.key.map { erasure.replacements[$0] ?? $0 }),
                    .bytes(erasure.json(answer.event, freeText: PlayerErasure.eventFreeText)),
                ])
        }
        for id in candidates.notices {
            guard
                let row = try session.first(
                    "SELECT event_key, event FROM \(spelling.table("notifications")) WHERE notification_id = ?1",
                    [.text(id)]),
                case let event = members(of: row.bytes(1)), event["user_id"] as? String == userID,
                (event["bundle_id"] as? String).map({ $0 == bundleID }) ?? (app == .defaultApp)
            else { continue }
            counts.notices += 1
            guard apply else { continue }
            try session.rows(
                "UPDATE \(spelling.table("notifications")) SET event_key = ?2, event = ?3 WHERE notification_id = ?1",
                [
                    .text(id), .optional(row.text(0).map { erasure.replacements[$0] ?? $0 }),
                    .bytes(erasure.json(row.bytes(1) ?? [], freeText: PlayerErasure.eventFreeText)),
                ])
        }
        let mentioning = try eraseAudit(
            &erasure, candidates, appName: appName, apply: apply, counts: &counts, in: session)
        for row in held {
            counts.heldCredits += 1
            guard apply else { continue }
            try session.rows(
                "UPDATE \(spelling.table("desk_approvals")) SET player = ?2, request = ?3, outcome = ?4 WHERE id = ?1",
                [
                    .integer(row.int64(0) ?? 0), .text(erasure.pseudonym),
                    .text(erasure.text(row.text(1) ?? "{}", freeText: PlayerErasure.supportFreeText)),
                    .optional(row.text(3).map { erasure.text($0, freeText: PlayerErasure.supportFreeText) }),
                ])
        }
        // The caps counted for the player, day by day, added to any the pseudonym counted already.
        let (before, after) = ("\(appName)/\(userID)", "\(appName)/\(erasure.pseudonym)")
        for row in try session.rows(
            "SELECT day, used FROM \(spelling.table("desk_daily_use")) WHERE kind = 'player' AND who = ?1",
            [.text(before)])
        {
            counts.caps += 1
            guard apply else { continue }
            let day = SQLValue.text(row.text(0) ?? "")
            if try session.first(
                "SELECT 1 FROM \(spelling.table("desk_daily_use")) WHERE kind = 'player' AND who = ?1 AND day = ?2",
                [.text(after), day]) != nil
            {
                try session.rows(
                    """
                    UPDATE \(spelling.table("desk_daily_use")) SET used = used + ?3
                        WHERE kind = 'player' AND who = ?1 AND day = ?2
                    """, [.text(after), day, .integer(row.int64(1) ?? 0)])
                try session.rows(
                    "DELETE FROM \(spelling.table("desk_daily_use")) WHERE kind = 'player' AND who = ?1 AND day = ?2",
                    [.text(before), day])
            } else {
                try session.rows(
                    "UPDATE \(spelling.table("desk_daily_use")) SET who = ?2 WHERE kind = 'player' AND who = ?1 AND day = ?3",
                    [.text(before), .text(after), day])
            }
        }
        try eraseMentions(mentioning, erasure, app: app, apply: apply, counts: &counts, in: session)
        return counts
    }

    /// Rows of `sql`, refused past ``bound``.
    static func bounded(_ session: any SQLSession, _ sql: String, _ values: [SQLValue]) throws -> [SQLRow] {
        let rows = try session.rows(sql + " LIMIT \(bound + 1)", values)
        guard rows.count <= bound else { throw pastBound }
        return rows
    }

    static var pastBound: ErasureRefused {
        ErasureRefused("the player has more than \(bound) rows of a kind: erase refused, nothing changed")
    }
}
