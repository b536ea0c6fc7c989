import Foundation

/// The SQLite ledger's schema. The version is `PRAGMA user_version`: a new file gets the ledger of 1.0.0 at once
/// (version 11, ``baseline``), then the migrations both databases share (``LedgerMigrations``). A file of a release
/// before 1.0.0 is refused, untouched: 1.0.0 migrates it first.
enum SQLiteSchema {
    static var version: Int { LedgerMigrations.latest }

    /// Brings the file to ``version``, one transaction per migration, its rows kept.
    static func migrate(_ connection: SQLiteConnection) throws {
        func isNew() throws -> Bool {
            try connection.rows("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'grants'").isEmpty
        }
        if try isNew() {
            // Asked again in the write transaction: two processes opening a new file at once (a worker and a
            // command) both found it new, and the second would fail on tables the first made.
            try connection.transaction {
                guard try isNew() else { return }
                try connection.execute(baseline + "PRAGMA user_version = \(LedgerMigrations.baseline);")
            }
        }
        let found = try connection.rows("PRAGMA user_version").first?.int(0) ?? 0
        guard found >= LedgerMigrations.baseline else { throw LedgerError.beforeBaseline("file version \(found)") }
        for migration in LedgerMigrations.all where found < migration.version {
            try connection.transaction { try apply(migration, connection) }
        }
    }

    /// A migration of the list both databases share, in the file's transaction (server functions: none here).
    private static func apply(_ migration: LedgerMigration, _ connection: SQLiteConnection) throws {
        for change in migration.changes {
            switch change {
            case .tables(let statements):
                for statement in statements { try connection.execute(DDLWords.sqlite.spell(statement)) }
            case .column(let table, let definition):
                let column = String(definition.prefix { $0 != " " })
                if try !columns(of: table, connection).contains(column) {
                    try connection.execute("ALTER TABLE \(table) ADD COLUMN \(DDLWords.sqlite.spell(definition))")
                }
            case .index(let name, let on):
                try connection.execute("CREATE INDEX IF NOT EXISTS \(name) ON \(DDLWords.sqlite.spell(on))")
            case .postgresFunctions:
                break
            }
        }
        try connection.execute("PRAGMA user_version = \(migration.version);")
    }

    /// The names of a table's columns: what a migration adds only when missing.
    private static func columns(of table: String, _ connection: SQLiteConnection) throws -> Set<String> {
        Set(try connection.rows("SELECT name FROM pragma_table_info('\(table)')").compactMap { $0.text(0) })
    }

    /// The ledger of 1.0.0 (version 11): what a file migrated by every release up to 1.0.0 holds (the upgrade drill
    /// compares the two, `scripts/test-upgrade.sh`). Grants: of jobs (`credit` `job`), of a subscription's later
    /// periods (`renewal`, to the subscription's order) and of purchases no job claimed (`unclaimed`, until a job
    /// ties them to its order). Subscriptions' states, and purchases Apple reported that wait for a job (`waiting`)
    /// until `due_at`, then end `claimed`, `refunded` or `credited` (and `tied` once a job claims the credit);
    /// `published` once the credit's event is acknowledged. The offsets the worker is about to commit, and whether
    /// the ledger held any decision when it began recording them (``OffsetStore``).
    static let baseline = """
        CREATE TABLE grants (
            app TEXT NOT NULL DEFAULT '',
            environment TEXT NOT NULL DEFAULT 'Production',
            transaction_id TEXT NOT NULL,
            order_id TEXT NOT NULL,
            purchase_id TEXT NOT NULL,
            user_id TEXT,
            product_id TEXT,
            quantity INTEGER,
            event BLOB,
            revoked_at TEXT,
            granted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
            credit TEXT NOT NULL DEFAULT 'job',
            original_transaction_id TEXT,
            credit_event_id TEXT, revenue INTEGER,
            UNIQUE (app, environment, purchase_id),
            UNIQUE (app, environment, transaction_id));
        CREATE UNIQUE INDEX grants_app_order ON grants (app, order_id) WHERE credit = 'job';
        CREATE INDEX grants_transaction_id ON grants (transaction_id);
        CREATE INDEX grants_original ON grants (app, environment, original_transaction_id)
            WHERE original_transaction_id IS NOT NULL;
        CREATE INDEX grants_renewal_order ON grants (app, order_id) WHERE credit = 'renewal';
        CREATE INDEX grants_purchase_id ON grants (purchase_id);
        CREATE TABLE results (
            app TEXT NOT NULL DEFAULT '',
            job_id TEXT NOT NULL,
            fingerprint TEXT NOT NULL DEFAULT '',
            event_id TEXT,
            event_type TEXT,
            event_time TEXT,
            event_key TEXT,
            event BLOB NOT NULL,
            decided_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
            PRIMARY KEY (app, job_id, fingerprint));
        CREATE INDEX results_decided_at ON results (decided_at);
        CREATE TABLE notifications (
            notification_id TEXT PRIMARY KEY,
            event_id TEXT,
            event_type TEXT,
            event_time TEXT,
            event_key TEXT,
            event BLOB,
            handled_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
        CREATE INDEX notifications_handled_at ON notifications (handled_at);
        CREATE TABLE purchase_states (
            app TEXT NOT NULL DEFAULT '',
            environment TEXT NOT NULL DEFAULT 'Production',
            purchase_id TEXT NOT NULL,
            transaction_id TEXT NOT NULL,
            revoked INTEGER NOT NULL,
            changed_at TEXT NOT NULL,
            revoked_share INTEGER,
            PRIMARY KEY (app, environment, purchase_id));
        CREATE INDEX purchase_states_transaction_id ON purchase_states (app, environment, transaction_id);
        CREATE INDEX purchase_states_changed_at ON purchase_states (changed_at);
        CREATE TABLE consumption_requests (
            app TEXT NOT NULL DEFAULT '',
            environment TEXT NOT NULL DEFAULT 'Production',
            transaction_id TEXT NOT NULL,
            notification_id TEXT NOT NULL,
            respond_by TEXT NOT NULL,
            requested_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
            answered_at TEXT,
            PRIMARY KEY (app, environment, transaction_id));
        CREATE INDEX consumption_requests_respond_by ON consumption_requests (respond_by);
        CREATE TABLE ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE consumer_offsets (
            group_id TEXT NOT NULL,
            topic TEXT NOT NULL,
            partition INTEGER NOT NULL,
            next_offset INTEGER NOT NULL,
            recorded_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
            PRIMARY KEY (group_id, topic, partition));
        INSERT INTO ledger_meta (key, value) VALUES ('offsets_baseline', 'empty');
        CREATE TABLE subscriptions (
            app TEXT NOT NULL,
            environment TEXT NOT NULL,
            original_transaction_id TEXT NOT NULL,
            status TEXT NOT NULL,
            expires_at TEXT,
            grace_period_expires_at TEXT,
            auto_renew INTEGER,
            auto_renew_product_id TEXT,
            changed_at TEXT NOT NULL,
            PRIMARY KEY (app, environment, original_transaction_id));
        CREATE TABLE unclaimed_purchases (
            app TEXT NOT NULL,
            environment TEXT NOT NULL,
            purchase_id TEXT NOT NULL,
            transaction_id TEXT NOT NULL,
            original_transaction_id TEXT,
            product_id TEXT NOT NULL,
            quantity INTEGER NOT NULL,
            due_at TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'waiting',
            published INTEGER NOT NULL DEFAULT 0,
            event_id TEXT NOT NULL,
            event_type TEXT NOT NULL,
            event_time TEXT NOT NULL,
            event_key TEXT NOT NULL,
            event BLOB NOT NULL,
            reported_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
            settled_at TEXT, revenue INTEGER,
            PRIMARY KEY (app, environment, purchase_id));
        CREATE INDEX unclaimed_waiting ON unclaimed_purchases (due_at) WHERE state = 'waiting';
        CREATE INDEX unclaimed_unpublished ON unclaimed_purchases (settled_at)
            WHERE published = 0 AND state IN ('credited', 'tied');
        CREATE INDEX unclaimed_settled ON unclaimed_purchases (settled_at) WHERE state <> 'waiting';

        """
}
