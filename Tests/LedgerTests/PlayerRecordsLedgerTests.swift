import CSQLite
import Foundation
@testable import Ledger
import LedgerDomain
import TestSupport
import Testing
import Vocabulary

/// A player's data request read from the ledger on each database, and on PostgreSQL under the roles the
/// deployment grants: the desk's role reads it all (and appends the export's audit line); the workers' may not
/// read the audit, which the command line says (docs/support-desk.md, "A player's data").
@Suite("A player's records, on both ledgers and under the desk's role")
struct PlayerRecordsLedgerTests {
    let event = Data(#"{"decision":"grant","user_id":"player-o1","order_id":"o1"}"#.utf8)

    // MARK: The erasure's steps, on either ledger

    /// A fresh ledger of `kind` (`sqlite` or `postgresql`).
    static func ledger(_ kind: String) async throws -> any Ledger {
        try await LedgerFactory.open(url: try url(kind), poolSize: 2)
    }

    /// A fresh database's URL of `kind`.
    static func url(_ kind: String) throws -> String {
        kind == "sqlite"
            ? "sqlite:" + FileManager.default.temporaryDirectory.appendingPathComponent("erase-\(UUID()).sqlite").path
            : try makePostgresDatabase()
    }

    /// A job's grant of `transaction` to `order` of `player`.
    static func grant(_ ledger: any Ledger, order: String, transaction: String, player: String) async throws {
        let claim = GrantClaim(
            orderID: order, transactionID: transaction, userID: player, productID: "coins", quantity: 1)
        let event = StoredEvent(
            eventID: "e-\(transaction)", type: "receipt.granted", time: "", key: order, json: Array("{}".utf8))
        #expect(
            try await ledger.record(
                Decision(
                    key: DecisionKey(app: .defaultApp, jobID: "j-\(transaction)", fingerprint: "f"), grant: claim,
                    event: event))
                == .recorded)
    }

    /// An agent's lookup, audited.
    static func lookup(
        _ ledger: any Ledger, ticket: String, player: String?, request: String = "{}", answer: String = "{}"
    ) async throws {
        _ = try await ledger.appendAudit(
            AuditEntry(
                at: Date(), app: "default", agent: "ana", agentName: "Ana", role: "agent", action: "lookup",
                outcome: "answered", ticket: ticket, player: player, request: request, answer: answer))
    }

    /// `user` erased; a pseudonym names no part of the value it replaces (so a text left can be searched for it).
    static func erase(_ ledger: any Ledger, _ user: String) async throws -> ErasureCounts {
        try await ledger.erase(
            user, app: .defaultApp, appName: "default", bundleID: "com.example", by: "lou", dryRun: false,
            pseudonym: { "P-\($0.rawValue)-\($1.utf8.reduce(7) { $0 &* 31 &+ Int($1) })" }, digest: { $0 }
        ).0
    }

    @Test("the grants, answers and audit lines of one player, none of another's", arguments: ["sqlite", "postgresql"])
    func records(kind: String) async throws {
        let url =
            kind == "sqlite"
            ? "sqlite:" + FileManager.default.temporaryDirectory.appendingPathComponent("player-\(UUID()).sqlite").path
            : try makePostgresDatabase()
        let ledger = try await LedgerFactory.open(url: url, poolSize: 2)
        #expect(
            try await ledger.record(jobID: "j1", claim: .grant(orderID: "o1", transactionID: "1"), event: event)
                == .recorded)
        let other = Data(#"{"decision":"grant","user_id":"player-o2","order_id":"o2"}"#.utf8)
        #expect(
            try await ledger.record(jobID: "j2", claim: .grant(orderID: "o2", transactionID: "2"), event: other)
                == .recorded)
        _ = try await ledger.appendAudit(
            AuditEntry(
                at: Date(), app: "default", agent: "ana", agentName: "Ana", role: "agent", action: "lookup",
                outcome: "answered", ticket: "T-1", player: "player-o1", request: "{}", answer: "{}"))
        let records = try await ledger.playerRecords("player-o1", app: .defaultApp, limit: 100)
        #expect(records.grants.map(\.orderID) == ["o1"] && records.grants.first?.transactionID == "1")
        #expect(records.answers.map(\.id) == ["j1"])
        #expect(records.audit.map(\.ticket) == ["T-1"])
        #expect(try await ledger.player(ofOrder: "o2", app: .defaultApp) == "player-o2")
        #expect(try await ledger.player(ofOrder: "o3", app: .defaultApp) == nil)
        await ledger.close()
    }

    @Test(
        "an erasure finds audit lines about no player by the player's identifiers as JSON writes them: a `/`, a quote, a `%`",
        arguments: ["sqlite", "postgresql"])
    func erasureFindsEscapedIdentifiers(kind: String) async throws {
        let ledger = try await Self.ledger(kind)
        let orders = ["shop/42", #"shop"43"#, "shop%44"]
        for (index, order) in orders.enumerated() {
            try await Self.grant(ledger, order: order, transaction: "\(900 + index)", player: "player-e")
            // A lookup by the order: its line names no player, and JSON escapes the order id.
            let request =
                #"{"order_id":"\#(order.replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "/", with: "\\/"))"}"#
            try await Self.lookup(ledger, ticket: "T-\(index)", player: nil, request: request)
        }
        let counts = try await Self.erase(ledger, "player-e")
        #expect(counts.audit == orders.count, "audit lines rewritten: \(counts.audit)")
        let left = try await ledger.audit(AuditFilter(limit: 100)).filter { $0.action == "lookup" }.map(\.request)
        #expect(left.count == orders.count && left.allSatisfy { !$0.contains("shop") }, "\(left)")
        await ledger.close()
    }

    @Test(
        "words alone: a line about no one that names the player is erased from, another player's line never, and a name only words carry erases nothing",
        arguments: ["sqlite", "postgresql"])
    func erasureOfMentions(kind: String) async throws {
        let ledger = try await Self.ledger(kind)
        try await Self.grant(ledger, order: "o-m", transaction: "950", player: "player-m")
        let lines: [(ticket: String, player: String?, answer: String)] = [
            ("about-no-one", nil, #"{"cases":["paid, granted to order o-m of player player-m"]}"#),
            ("someone-else", "player-b", #"{"note":"like player-m, lost 50 gems"}"#),
            ("typo", nil, #"{"cases":["paid, granted to order o-t of player typo-m"]}"#),
        ]
        for line in lines {
            try await Self.lookup(ledger, ticket: line.ticket, player: line.player, answer: line.answer)
        }
        func answer(_ ticket: String) async throws -> String? {
            try await ledger.audit(AuditFilter(limit: 100)).first { $0.ticket == ticket }?.answer
        }
        // A mistyped id only someone's words carry: nothing of a player, nothing changed.
        let typo = try await Self.erase(ledger, "typo-m")
        #expect(typo.total == 0 && typo.auditMentions == 0)
        #expect(try await answer("typo") == lines[2].answer)
        let counts = try await Self.erase(ledger, "player-m")
        #expect(counts.grants == 1 && counts.auditMentions == 1, "\(counts)")
        #expect(try await answer("about-no-one") == #"{"cases":["(erased)"]}"#)
        #expect(try await answer("someone-else") == lines[1].answer, "another player's line touched")
        await ledger.close()
    }

    @Test(
        "a player id inside most audit lines (`7` in `1700`): only the lines that name the player count towards the bound",
        arguments: ["sqlite", "postgresql"])
    func erasureOfAShortIdentifier(kind: String) async throws {
        let url = try Self.url(kind)
        let ledger = try await LedgerFactory.open(url: url, poolSize: 2)
        try await Self.grant(ledger, order: "o-short", transaction: "960", player: "7")
        try await Self.lookup(ledger, ticket: "T-7", player: nil, answer: #"{"cases":["granted to player 7"]}"#)
        // A credit support asked for the player and a lead rejected: its order was never granted.
        let held = try await ledger.requestApproval(
            ApprovalRequest(
                createdAt: Date(), app: "default", requestedBy: "ana", requestedName: "Ana", ticket: "T-8",
                player: "7", request: #"{"order_id":"order-17","user_id":"7"}"#))
        let rejected = ApprovalRequest.Decision(status: .rejected, by: "lea", byName: "Lea", at: Date(), outcome: "")
        #expect(try await ledger.decideApproval(id: held, from: .pending, to: rejected))
        // More lines than the bound that hold a 7 inside another number, as a busy desk's audit does.
        let lines = ErasureQueries.bound + 1
        let answer = #"{"cases":["paid 1700 gems"]}"#
        let bulk =
            kind == "sqlite"
            ? """
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(lines))
                INSERT INTO desk_audit (at, app, agent, agent_name, role, action, outcome, ticket, request, answer)
                SELECT '2026-01-01T00:00:00.000Z', 'default', 'ana', 'Ana', 'agent', 'lookup', 'answered', 'T-' || i,
                    '{}', '\(answer)' FROM n
            """
            : """
            INSERT INTO receipt_worker.desk_audit (at, app, agent, agent_name, role, action, outcome, ticket, request, answer)
                SELECT now(), 'default', 'ana', 'Ana', 'agent', 'lookup', 'answered', 'T-' || g, '{}', '\(answer)'
                FROM generate_series(1, \(lines)) g
            """
        #expect(runSQL(url, bulk) == 0)
        // A lookup of that order, about no one: the order is the player's, known from the held credit alone.
        try await Self.lookup(ledger, ticket: "T-9", player: nil, request: #"{"order_id":"order-17"}"#)
        let counts = try await Self.erase(ledger, "7")
        #expect(counts.grants == 1 && counts.auditMentions == 1 && counts.heldCredits == 1, "\(counts)")
        let newest = try await ledger.audit(AuditFilter(limit: 4))
        #expect(newest.first.map { !$0.request.contains("order-17") } == true, "the held credit's order left")
        #expect(newest.dropFirst().map(\.answer) == [answer, answer, answer], "another line changed")
        await ledger.close()
    }

    @Test(
        "an erasure waits for a held credit of the player: pending, and while a lead approves it; once decided, it goes",
        arguments: ["sqlite", "postgresql"])
    func erasureWaitsForHeldCredits(kind: String) async throws {
        let ledger = try await Self.ledger(kind)
        let id = try await ledger.requestApproval(
            ApprovalRequest(
                createdAt: Date(), app: "default", requestedBy: "ana", requestedName: "Ana", ticket: "T-1",
                player: "player-h", request: #"{"order_id":"o-h","user_id":"player-h"}"#))
        func erase() async throws -> ErasureCounts { try await Self.erase(ledger, "player-h") }
        await #expect(throws: ErasureRefused.self) { _ = try await erase() }
        let approving = ApprovalRequest.Decision(status: .approving, by: "lea", byName: "Lea", at: Date(), outcome: "")
        #expect(try await ledger.decideApproval(id: id, from: .pending, to: approving))
        await #expect(throws: ErasureRefused.self, "erased while a lead approves it") { _ = try await erase() }
        let rejected = ApprovalRequest.Decision(status: .rejected, by: "lea", byName: "Lea", at: Date(), outcome: "")
        #expect(try await ledger.decideApproval(id: id, from: .approving, to: rejected))
        #expect(try await erase().heldCredits == 1)
        await ledger.close()
    }

    @Test(
        "on PostgreSQL the desk's role reads a player's records and appends the export's line; the workers' cannot read the audit"
    )
    func roles() async throws {
        let url = try makePostgresDatabase()
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let (worker, desk) = ("ledger_app_\(suffix)", "ledger_desk_\(suffix)")
        #expect(runPsql(url, "CREATE ROLE \(worker) LOGIN; CREATE ROLE \(desk) LOGIN") == 0)
        let owner = try await LedgerFactory.open(url: url, poolSize: 1)
        #expect(
            try await owner.record(jobID: "j1", claim: .grant(orderID: "o1", transactionID: "1"), event: event)
                == .recorded)
        await owner.close()
        #expect(runPsql(url, PostgresSchema(name: "receipt_worker")!.script(grantingTo: worker, deskRole: desk)) == 0)

        let asDesk = try await LedgerFactory.open(
            url: url.replacingOccurrences(of: "://postgres@", with: "://\(desk)@"), poolSize: 1)
        let records = try await asDesk.playerRecords("player-o1", app: .defaultApp, limit: 100)
        #expect(records.grants.map(\.orderID) == ["o1"])
        _ = try await asDesk.appendAudit(
            AuditEntry(
                at: Date(), app: "default", agent: "cli:lou", agentName: "lou", role: "operator", action: "export",
                outcome: "exported", ticket: "-", player: "player-o1", request: "{}", answer: "{}"))
        // An erasure rewrites the columns naming the player, which the desk's role is granted and nothing more.
        let (counts, pseudonym) = try await asDesk.erase(
            "player-o1", app: .defaultApp, appName: "default", bundleID: "", by: "lou", dryRun: false,
            pseudonym: { "erased-\($0.rawValue)-\($1)" }, digest: { "sha-\($0)" })
        #expect(counts.grants == 1 && counts.answers == 1 && counts.audit == 1)
        #expect(try await asDesk.playerRecords("player-o1", app: .defaultApp, limit: 10).grants.isEmpty)
        #expect(try await asDesk.erasureRecord(app: .defaultApp, pseudonym: pseudonym)?.erasedBy == "lou")
        #expect(
            runPsql(
                url.replacingOccurrences(of: "://postgres@", with: "://\(desk)@"),
                "DELETE FROM receipt_worker.desk_audit") != 0)
        #expect(
            runPsql(
                url.replacingOccurrences(of: "://postgres@", with: "://\(desk)@"),
                "UPDATE receipt_worker.desk_audit SET action = 'x'") != 0, "only the columns naming a player")
        await asDesk.close()

        let asWorker = try await LedgerFactory.open(
            url: url.replacingOccurrences(of: "://postgres@", with: "://\(worker)@"), poolSize: 1)
        await #expect(throws: (any Error).self) {
            try await asWorker.playerRecords("player-o1", app: .defaultApp, limit: 100)
        }
        await asWorker.close()
    }
}

/// `sql` run on the database of `url` (a ledger's, SQLite or PostgreSQL) outside the ledger: 0 when it succeeded.
private func runSQL(_ url: String, _ sql: String) -> Int32 {
    guard url.hasPrefix("sqlite:") else { return runPsql(url, sql) }
    var db: OpaquePointer?
    guard sqlite3_open(String(url.dropFirst("sqlite:".count)), &db) == SQLITE_OK else { return 1 }
    defer { sqlite3_close(db) }
    return sqlite3_exec(db, sql, nil, nil, nil)
}
