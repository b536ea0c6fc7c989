import Foundation
/// The PostgreSQL ledger's tables and functions, in a schema of their own (`ledger.schema`), as numbered
/// migrations. The worker applies what is missing at start-up; a DBA can apply them by hand instead
/// (`receipt-worker ledger migrate --print`) and let the worker run under a role that cannot create
/// anything. Every statement is idempotent, so the printed script can be run again safely.
public struct PostgresSchema: Sendable {
    public struct Migration: Sendable {
        public let version: Int
        public let description: String
        /// How it runs beside traffic (``MigrationStep``); the ledger of 1.0.0, made on an empty database, is one
        /// transaction.
        public let steps: [MigrationStep]
    }

    /// A lower-case SQL identifier, so it is never quoted and never injected.
    public let name: String

    public static let defaultName = "receipt_worker"

    /// The default app's bundle id (`apple.bundle_id`), recorded in the ledger on first use: its rows have the
    /// app "" (``checkDefaultApp(on:)``).
    public var defaultBundleID: String?

    /// Takes the advisory lock of migrations: replicas starting together would race on CREATE ... IF NOT
    /// EXISTS (PostgreSQL then fails on its catalog's unique index). Any constant private to this ledger.
    static let migrationLock = 7_261_115
    /// Taken (try-lock) by pruning, so that of many replicas one prunes at a time.
    static let pruneLock = 7_261_116

    /// Nil unless `name` is a plain identifier (see ``isIdentifier(_:)``).
    public init?(name: String, defaultBundleID: String? = nil) {
        guard Self.isIdentifier(name) else { return nil }
        self.name = name
        self.defaultBundleID = defaultBundleID
    }

    /// 1 to 63 of `a-z`, `0-9`, `_`, not starting with a digit: never quoted, never injected.
    public static func isIdentifier(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        let digits = UInt8(ascii: "0")...UInt8(ascii: "9")
        return (1...63).contains(bytes.count) && !digits.contains(bytes[0])
            && bytes.allSatisfy {
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || digits.contains($0) || $0 == 95
            }
    }

    /// What a role needs to run the worker on a migrated schema, and nothing more: read and write the
    /// ledger's rows (update a grant only to revoke or reinstate it; delete only stored results, for
    /// pruning, and the rows past their retention), call its functions. No CREATE anywhere.
    public func grants(to role: String) -> [String] {
        [
            "GRANT USAGE ON SCHEMA \(name) TO \(role)",
            "GRANT SELECT ON \(name).schema_migrations TO \(role)",
            "GRANT SELECT, INSERT, UPDATE ON \(name).grants TO \(role)",
            "GRANT SELECT, INSERT, DELETE ON \(name).results TO \(role)",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON \(name).notifications TO \(role)",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON \(name).consumption_requests TO \(role)",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON \(name).purchase_states TO \(role)",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON \(name).unclaimed_purchases TO \(role)",
            "GRANT SELECT, INSERT, UPDATE ON \(name).subscriptions TO \(role)",
            "GRANT SELECT, INSERT ON \(name).ledger_meta TO \(role)",
            "GRANT SELECT, INSERT, UPDATE ON \(name).consumer_offsets TO \(role)",
            "GRANT SELECT, INSERT, UPDATE ON \(name).leases TO \(role)",
            // The operators' lookup and credit, run with the workers' configuration, append to the desk's audit:
            // a line added (its id read back), nothing of the audit read.
            "GRANT INSERT, SELECT (id) ON \(name).desk_audit TO \(role)",
            "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA \(name) TO \(role)",
        ]
    }

    /// What the support desk's role needs (`receipt-worker desk`): read the ledger, credit a purchase through the
    /// claim (a grant, its stored answer, a purchase's state, a credit tied), and the desk's own tables, the audit
    /// only appended to. No DELETE anywhere, no CREATE.
    public func deskGrants(to role: String) -> [String] {
        [
            "GRANT USAGE ON SCHEMA \(name) TO \(role)",
            """
            GRANT SELECT ON \(name).schema_migrations, \(name).notifications, \(name).consumption_requests,
                \(name).subscriptions, \(name).ledger_meta TO \(role)
            """,
            "GRANT SELECT, INSERT, UPDATE ON \(name).grants TO \(role)",
            "GRANT SELECT, INSERT ON \(name).results TO \(role)",
            "GRANT SELECT, INSERT, UPDATE ON \(name).purchase_states TO \(role)",
            "GRANT SELECT, UPDATE ON \(name).unclaimed_purchases TO \(role)",
            "GRANT SELECT, INSERT ON \(name).desk_audit TO \(role)",
            "GRANT SELECT, INSERT, UPDATE ON \(name).desk_approvals, \(name).desk_daily_use TO \(role)",
            // Sessions start (INSERT) and end (UPDATE); none is deleted.
            "GRANT SELECT, INSERT, UPDATE ON \(name).desk_sessions TO \(role)",
            // A lead's erasure of a player rewrites the columns that name them, and nothing else: of the answers, the
            // notifications' events and the audit (which it otherwise only appends to); and records it.
            "GRANT UPDATE (job_id, event_key, event) ON \(name).results TO \(role)",
            "GRANT UPDATE (event_key, event) ON \(name).notifications TO \(role)",
            "GRANT UPDATE (player, request, answer) ON \(name).desk_audit TO \(role)",
            "GRANT SELECT, INSERT, UPDATE ON \(name).player_erasures TO \(role)",
            "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA \(name) TO \(role)",
        ]
    }

    public var latestVersion: Int { migrations.last?.version ?? 0 }

    /// The schema and the table of applied versions.
    var bootstrap: [String] {
        [
            // Not CREATE SCHEMA IF NOT EXISTS: that needs CREATE on the database even when the schema exists,
            // which the schema's owner (made by a DBA) need not have.
            """
            DO $$ BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = '\(name)') THEN CREATE SCHEMA \(name); END IF;
            END $$
            """,
            """
            CREATE TABLE IF NOT EXISTS \(name).schema_migrations (
                version INTEGER PRIMARY KEY,
                description TEXT NOT NULL,
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now())
            """,
        ]
    }

    func record(_ migration: Migration) -> String {
        """
        INSERT INTO \(name).schema_migrations (version, description)
            VALUES (\(migration.version), \(Self.literal(migration.description))) ON CONFLICT (version) DO NOTHING
        """
    }

    /// `text` as an SQL string literal: a description says "a grant service's answer", and the script is plain SQL
    /// (the printed migration too), not a statement with parameters.
    static func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }

    /// The ledger of 1.0.0 at once (``baseline``), then the migrations both databases share. A ledger of a release
    /// before 1.0.0 is refused: 1.0.0 migrates it first.
    public var migrations: [Migration] {
        [
            Migration(
                version: LedgerMigrations.baseline, description: "the ledger of 1.0.0", steps: [.transaction(baseline)])
        ]
            + LedgerMigrations.all.map {
                Migration(version: $0.version, description: $0.description, steps: steps(of: $0))
            }
    }

    /// A migration of the list both databases share, as steps that run beside traffic and the previous release.
    func steps(of migration: LedgerMigration) -> [MigrationStep] {
        let words = DDLWords.postgres(schema: name)
        return migration.changes.map { change -> MigrationStep in
            switch change {
            case .tables(let statements):
                .transaction(statements.map(words.spell))
            case .column(let table, let definition):
                .transaction(["ALTER TABLE \(name).\(table) ADD COLUMN IF NOT EXISTS \(words.spell(definition))"])
            case .index(let index, let on):
                .index(
                    name: index,
                    create: "CREATE INDEX CONCURRENTLY IF NOT EXISTS \(index) ON \(name).\(words.spell(on))")
            case .postgresFunctions(let functions):
                .transaction(self[keyPath: functions])
            }
        }
    }
}

extension PostgresSchema {
    /// Records the default app's bundle id on first use, and refuses another (``LedgerQueries/checkDefaultApp(_:in:)``).
    func checkDefaultApp(on connection: PostgresConnection) throws {
        let session = PostgresSession(connection: connection, spelling: PostgresDialect.spelling(schema: name))
        try LedgerQueries.checkDefaultApp(defaultBundleID, in: session)
    }
}
