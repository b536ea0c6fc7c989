import Foundation
/// The ledger's migrations after 1.0.0's, one list for SQLite and PostgreSQL: what each adds, written once. Each
/// database renders a change its own way (``SQLiteSchema``: one transaction on the file; ``PostgresSchema``: steps
/// that run beside traffic and beside the previous release). Before them, each database makes the ledger of 1.0.0
/// at once on a new file or schema (version ``baseline``); a ledger of a release before 1.0.0 is refused,
/// untouched: 1.0.0 migrates it first (CHANGELOG.md).
///
/// A new table, column or index is one entry here, in the DDL both databases take, with these words spelled by
/// each: `{schema}` (PostgreSQL's schema and a dot; nothing in SQLite), `{time}` (`TIMESTAMPTZ`; RFC 3339 `TEXT`),
/// `{bigint}` (`BIGINT`; `INTEGER`), `{identity}` (a key the database numbers: `BIGINT GENERATED ALWAYS AS
/// IDENTITY PRIMARY KEY`; `INTEGER PRIMARY KEY AUTOINCREMENT`).
enum LedgerMigrations {
    /// The version of 1.0.0's ledger, the oldest this release migrates.
    static let baseline = 11

    static let all: [LedgerMigration] = [
        LedgerMigration(
            version: 12, description: "the support desk: audit, held credits, caps",
            changes: [
                // The desk's audit, appended, never pruned: the worker's role may not even read it, the desk's
                // may only add to it.
                .tables([
                    """
                    CREATE TABLE IF NOT EXISTS {schema}desk_audit (
                        id {identity},
                        at {time} NOT NULL,
                        app TEXT NOT NULL,
                        agent TEXT NOT NULL,
                        agent_name TEXT NOT NULL,
                        role TEXT NOT NULL,
                        action TEXT NOT NULL,
                        outcome TEXT NOT NULL,
                        ticket TEXT NOT NULL,
                        player TEXT,
                        request TEXT NOT NULL,
                        answer TEXT NOT NULL)
                    """,
                    "CREATE INDEX IF NOT EXISTS desk_audit_at ON {schema}desk_audit (at)",
                    "CREATE INDEX IF NOT EXISTS desk_audit_agent ON {schema}desk_audit (agent, id)",
                    "CREATE INDEX IF NOT EXISTS desk_audit_player ON {schema}desk_audit (player, id) WHERE player IS NOT NULL",
                    // Credits held for a lead.
                    """
                    CREATE TABLE IF NOT EXISTS {schema}desk_approvals (
                        id {identity},
                        created_at {time} NOT NULL,
                        app TEXT NOT NULL,
                        requested_by TEXT NOT NULL,
                        requested_name TEXT NOT NULL,
                        ticket TEXT NOT NULL,
                        player TEXT NOT NULL,
                        request TEXT NOT NULL,
                        status TEXT NOT NULL,
                        decided_by TEXT,
                        decided_name TEXT,
                        decided_at {time},
                        outcome TEXT)
                    """,
                    "CREATE INDEX IF NOT EXISTS desk_approvals_status ON {schema}desk_approvals (status, id)",
                    // Each day's use of the desk's caps.
                    """
                    CREATE TABLE IF NOT EXISTS {schema}desk_daily_use (
                        kind TEXT NOT NULL,
                        who TEXT NOT NULL,
                        day TEXT NOT NULL,
                        used INTEGER NOT NULL,
                        PRIMARY KEY (kind, who, day))
                    """,
                ]),
                // A player's grants, for the desk's lookups.
                .index("grants_player", on: "grants (app, user_id) WHERE user_id IS NOT NULL"),
            ]),
        LedgerMigration(
            version: 13, description: "leases: one replica at a time",
            changes: [
                // What one replica at a time does: the sweep of Apple's notification history, the status checks,
                // the refund requests answered by policy.
                .tables([
                    """
                    CREATE TABLE IF NOT EXISTS {schema}leases (
                        name TEXT PRIMARY KEY,
                        holder TEXT NOT NULL,
                        expires_at {time} NOT NULL,
                        state TEXT NOT NULL DEFAULT '')
                    """
                ])
            ]),
        LedgerMigration(
            version: 14, description: "subscriptions whose news is overdue",
            changes: [
                // When each subscription was last asked of Apple; the index the status checks read.
                .column(table: "subscriptions", "checked_at {time}"),
                .index(
                    "subscriptions_overdue",
                    on: "subscriptions (app, expires_at) WHERE status IN ('active', 'grace_period', 'billing_retry')"),
            ]),
        LedgerMigration(
            version: 15, description: "the facts of a notification in one statement",
            changes: [.postgresFunctions(\.purchaseFactsFunction)]),
        LedgerMigration(
            version: 16, description: "what only releases before 1.0.0 called, dropped",
            changes: [.postgresFunctions(\.beforeOneDrops)]),
        LedgerMigration(
            version: 17, description: "a grant service's answer to a refund request, received",
            changes: [
                // When a grant service's answer reached the worker, before Apple took it: an app's policy never
                // answers over one still being sent.
                .column(table: "consumption_requests", "answer_received_at {time}")
            ]),
        LedgerMigration(
            version: 18, description: "the support desk's sessions, kept in the ledger",
            changes: [
                // A console session by the SHA-256 of its cookie's random token (the cookie alone finds it): sign-out
                // and a lead end one for every desk replica at once, an idle one ends by itself. Kept, as the audit
                // is (a row per sign-in): who was signed in when, for an investigation; the desk deletes nothing.
                .tables([
                    """
                    CREATE TABLE IF NOT EXISTS {schema}desk_sessions (
                        id TEXT PRIMARY KEY,
                        subject TEXT NOT NULL,
                        name TEXT NOT NULL,
                        roles TEXT NOT NULL,
                        created_at {time} NOT NULL,
                        seen_at {time} NOT NULL,
                        expires_at {time} NOT NULL,
                        ended_at {time},
                        ended_by TEXT)
                    """,
                    "CREATE INDEX IF NOT EXISTS desk_sessions_subject ON {schema}desk_sessions (subject) WHERE ended_at IS NULL",
                ])
            ]),
        LedgerMigration(
            version: 19, description: "the audit by action; players erased",
            changes: [
                // Each player erased, by their pseudonym (never the erased values): when, by whom, what it rewrote,
                // and when its `player.erased` event was published (once).
                .tables([
                    """
                    CREATE TABLE IF NOT EXISTS {schema}player_erasures (
                        app TEXT NOT NULL,
                        pseudonym TEXT NOT NULL,
                        erased_at {time} NOT NULL,
                        erased_by TEXT NOT NULL,
                        counts TEXT NOT NULL,
                        published_at {time},
                        PRIMARY KEY (app, pseudonym))
                    """
                ]),
                // The mass extensions started (`extend_all`) and the exports, newest first, without reading the
                // whole audit (it is never pruned).
                .index("desk_audit_action", on: "desk_audit (action, id)"),
            ]),
        LedgerMigration(
            version: 20, description: "refunds remembered before apps found by their whole key",
            changes: [.postgresFunctions(\.legacyRefundsByKey)]),
        LedgerMigration(
            version: 21, description: "what a notification handled came from",
            changes: [
                // NULL: Apple's (and every row of a release before); `subscription_status`: a status the worker
                // asked Apple for. The sweep's "has Apple been silent?" reads Apple's alone.
                .column(table: "notifications", "source TEXT")
            ]),
    ]

    /// The latest version, on both databases.
    static var latest: Int { all.last?.version ?? 0 }
}

/// One version of the ledger's schema.
struct LedgerMigration: Sendable {
    let version: Int
    let description: String
    let changes: [SchemaChange]
}

/// What a migration changes, in the words ``LedgerMigrations`` spells per database.
enum SchemaChange: Sendable {
    /// New tables and their indexes (`CREATE ... IF NOT EXISTS`), made in one short transaction: empty, they
    /// lock nothing anyone waits for.
    case tables([String])
    /// A nullable column without a default, added when missing: a catalog change, no row rewritten.
    case column(table: String, _ definition: String)
    /// An index of a table that has rows (`name`, then `on`: the table, its columns and any `WHERE`): on
    /// PostgreSQL built `CONCURRENTLY`, without blocking writes.
    case index(_ name: String, on: String)
    /// Server functions and their triggers (PostgreSQL alone: SQLite has none), created, replaced or dropped.
    case postgresFunctions(any KeyPath<PostgresSchema, [String]> & Sendable)
}

/// ``LedgerMigrations``' four words as one database spells them.
struct DDLWords {
    let schema, time, bigint, identity: String

    static let sqlite = DDLWords(
        schema: "", time: "TEXT", bigint: "INTEGER", identity: "INTEGER PRIMARY KEY AUTOINCREMENT")

    static func postgres(schema: String) -> DDLWords {
        DDLWords(
            schema: schema + ".", time: "TIMESTAMPTZ", bigint: "BIGINT",
            identity: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")
    }

    func spell(_ sql: String) -> String {
        sql.replacingOccurrences(of: "{schema}", with: schema).replacingOccurrences(of: "{time}", with: time)
            .replacingOccurrences(of: "{bigint}", with: bigint).replacingOccurrences(of: "{identity}", with: identity)
    }
}

extension LedgerError {
    /// A ledger of a release before 1.0.0 (`found` says how it was told): refused, nothing changed.
    static func beforeBaseline(_ found: String) -> LedgerError {
        LedgerError(
            .migrationFailed,
            "this ledger was written by a release before 1.0.0 (\(found)): migrate it with receipt-worker 1.0.0"
                + " first (`ledger migrate`; a SQLite file: any command of 1.0.0 that opens it, such as `ledger prune`),"
                + " then with this release. Nothing was changed (CHANGELOG.md, upgrade notes)")
    }
}
