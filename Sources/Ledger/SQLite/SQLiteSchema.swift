import Foundation

/// The SQLite ledger's schema, and the migrations of files written by earlier releases. The version is
/// `PRAGMA user_version`: 0 the first ledger; 1 purchase identity; 2 after the grant (events kept with grants,
/// revocations, notifications, consumption requests); 3 keys scoped by app, purchases by environment, job
/// fingerprints, and stored events' headers in columns; 4 an index of grants by purchase alone (a consumption
/// answer names a transaction of any app) and the consumer group's offsets (``OffsetStore``); 5 grants
/// without a job (renewals, purchases no job claimed), subscriptions; 6 the share of a purchase refunded.
/// From 10 on the numbers are PostgreSQL's: version 6 is PostgreSQL's 9, 10 is its 10, and from 11 on both take
/// one list (``LedgerMigrations``).
enum SQLiteSchema {
    static var version: Int { LedgerMigrations.latest }

    /// Brings the file to ``version`` in one transaction per migration: a new file gets the whole schema at
    /// once; an older one each missing migration in turn, its rows kept. Version 3 gives each row the app its
    /// event names: it needs the default app's bundle id (`defaultBundleID`), whose rows are the scope "".
    static func migrate(_ connection: SQLiteConnection, defaultBundleID: String?) throws {
        let hasGrants = try connection.first("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'grants'") {
            _ in true
        }
        if hasGrants == nil {
            // A new file: the schema of version 6 at once, then the ladder shared with PostgreSQL from 10.
            try transaction(connection) {
                try connection.execute(tables + purchaseLife + offsetsBaseline + "PRAGMA user_version = 6;")
            }
        }
        let found = try connection.first("PRAGMA user_version") { $0.integer(0) ?? 0 } ?? 0
        var current = found
        if current < 1 {
            try transaction(connection) { try migrateToPurchaseIdentity(connection) }
            current = 1
        }
        if current < 2 {
            try transaction(connection) { try migrateToAfterGrant(connection) }
            current = 2
        }
        if current < 3 {
            // Files older than version 2 are older than apps: every row is the default app's.
            guard found < 2 || defaultBundleID != nil else {
                throw LedgerError(
                    .misconfigured,
                    "migrating this file to version 3 gives each row its app: the default app's bundle id"
                        + " (apple.bundle_id) must be set", key: "apple.bundle_id")
            }
            try transaction(connection) { try migrateToAppScope(connection, defaultBundleID: defaultBundleID) }
        }
        if current < 4 {
            try transaction(connection) {
                try connection.execute(purchaseIndex + consumerOffsets + offsetsBaseline + "PRAGMA user_version = 4;")
            }
        }
        if current < 5 {
            try transaction(connection) { try migrateToPurchaseLife(connection) }
        }
        if current < 6 {
            try transaction(connection) { try migrateToRefundShares(connection) }
        }
        if found < 10 {
            try transaction(connection) { try connection.execute(yearTwo + "PRAGMA user_version = 10;") }
        }
        for migration in LedgerMigrations.all where found < migration.version {
            try transaction(connection) { try apply(migration, connection) }
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
            case .rows(let statement):
                try connection.execute(DDLWords.sqlite.spell(statement))
            case .postgresFunctions:
                break
            }
        }
        try connection.execute("PRAGMA user_version = \(migration.version);")
    }

    /// The names of a table's columns: what a migration adds only when missing.
    private static func columns(of table: String, _ connection: SQLiteConnection) throws -> Set<String> {
        var columns: Set<String> = []
        try connection.query("SELECT name FROM pragma_table_info('\(table)')") { columns.insert($0.text(0) ?? "") }
        return columns
    }

    /// Version 10, as PostgreSQL's migration 10: a decision's event stored once (in its
    /// result; grants' copies emptied), indexes for the retention of notifications, consumption requests,
    /// purchase states and settled unclaimed purchases, and the triggers for writers older than the previous
    /// release gone. Every table has its key already (SQLite's rowid, and the unique keys it had).
    static let yearTwo = """
        DROP TRIGGER IF EXISTS results_event_columns;
        DROP TRIGGER IF EXISTS notifications_event_columns;
        DROP TRIGGER IF EXISTS grants_order_columns;
        DROP TRIGGER IF EXISTS grants_original_transaction;
        UPDATE grants SET event = NULL WHERE event IS NOT NULL;
        CREATE INDEX IF NOT EXISTS notifications_handled_at ON notifications (handled_at);
        CREATE INDEX IF NOT EXISTS consumption_requests_respond_by ON consumption_requests (respond_by);
        CREATE INDEX IF NOT EXISTS purchase_states_changed_at ON purchase_states (changed_at);
        CREATE INDEX IF NOT EXISTS unclaimed_settled ON unclaimed_purchases (settled_at) WHERE state <> 'waiting';

        """

    /// Version 6: the share of a revoked purchase refunded in all (milliunits), so a later refund of a larger
    /// share (a prorated refund, then a full one) is told apart from the same refund again. Rows before it say
    /// none (unknown). A column added: no row is rewritten.
    private static func migrateToRefundShares(_ connection: SQLiteConnection) throws {
        if try !columns(of: "purchase_states", connection).contains("revoked_share") {
            try connection.execute("ALTER TABLE purchase_states ADD COLUMN revoked_share INTEGER")
        }
        try connection.execute("PRAGMA user_version = 6;")
    }

    /// Version 5: grants made without a job (a subscription's periods, purchases no job claimed) beside those
    /// of jobs: an order holds one purchase of its jobs (the unique index is now partial), and a grant knows its
    /// subscription (`original_transaction_id`). Subscriptions' states, and reported purchases waiting for a job.
    private static func migrateToPurchaseLife(_ connection: SQLiteConnection) throws {
        let columns = try columns(of: "grants", connection)
        if !columns.contains("credit") {
            // The inline UNIQUE (app, order_id) goes: SQLite drops a table constraint only by copying the table.
            try connection.execute(
                """
                DROP TRIGGER IF EXISTS grants_order_columns;
                DROP INDEX IF EXISTS grants_transaction_id;
                DROP INDEX IF EXISTS grants_purchase_id;
                ALTER TABLE grants RENAME TO grants_v4;
                \(grantsTable)
                INSERT INTO grants (app, environment, transaction_id, order_id, purchase_id, user_id, product_id,
                        quantity, event, revoked_at, granted_at)
                    SELECT app, environment, transaction_id, order_id, purchase_id, user_id, product_id, quantity,
                        event, revoked_at, granted_at
                    FROM grants_v4 ORDER BY rowid;
                DROP TABLE grants_v4;
                UPDATE grants SET original_transaction_id = json_extract(CAST(event AS TEXT), '$.original_transaction_id')
                    WHERE purchase_id LIKE 'w:%' AND json_valid(CAST(event AS TEXT));
                """)
        }
        try connection.execute(purchaseLife + "PRAGMA user_version = 5;")
    }

    /// Grants: of jobs (`credit` `job`), of a subscription's later periods (`renewal`, to the subscription's
    /// order) and of purchases no job claimed (`unclaimed`, until a job ties them to its order).
    private static let grantsTable = """
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
            credit_event_id TEXT,
            UNIQUE (app, environment, purchase_id),
            UNIQUE (app, environment, transaction_id));
        CREATE UNIQUE INDEX grants_app_order ON grants (app, order_id) WHERE credit = 'job';
        CREATE INDEX grants_transaction_id ON grants (transaction_id);
        CREATE INDEX grants_original ON grants (app, environment, original_transaction_id)
            WHERE original_transaction_id IS NOT NULL;
        CREATE INDEX grants_renewal_order ON grants (app, order_id) WHERE credit = 'renewal';
        \(purchaseIndex)
        CREATE TRIGGER grants_order_columns AFTER INSERT ON grants
            WHEN NEW.user_id IS NULL AND json_valid(CAST(NEW.event AS TEXT))
            BEGIN UPDATE grants SET \(grantColumns) WHERE rowid = NEW.rowid; END;
        CREATE TRIGGER grants_original_transaction AFTER INSERT ON grants
            WHEN NEW.original_transaction_id IS NULL AND NEW.purchase_id LIKE 'w:%'
                AND json_valid(CAST(NEW.event AS TEXT))
            BEGIN UPDATE grants SET original_transaction_id =
                json_extract(CAST(NEW.event AS TEXT), '$.original_transaction_id') WHERE rowid = NEW.rowid; END;

        """

    /// Subscriptions' states (the newest notification's, by `signedDate`) and purchases Apple reported that
    /// wait for a job (`waiting`) until `due_at`, then end `claimed`, `refunded` or `credited` (and `tied`
    /// once a job claims the credit); `published` once the credit's event is acknowledged.
    private static let purchaseLife = """
        CREATE TABLE IF NOT EXISTS subscriptions (
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
        CREATE TABLE IF NOT EXISTS unclaimed_purchases (
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
            settled_at TEXT,
            PRIMARY KEY (app, environment, purchase_id));
        CREATE INDEX IF NOT EXISTS unclaimed_waiting ON unclaimed_purchases (due_at) WHERE state = 'waiting';
        CREATE INDEX IF NOT EXISTS unclaimed_unpublished ON unclaimed_purchases (settled_at)
            WHERE published = 0 AND state IN ('credited', 'tied');

        """

    /// Grants by purchase alone: a consumption answer names a transaction without its app or environment.
    private static let purchaseIndex = "CREATE INDEX IF NOT EXISTS grants_purchase_id ON grants (purchase_id);"

    /// The offsets the worker is about to commit, recorded before each commit (``OffsetStore``).
    private static let consumerOffsets = """
        CREATE TABLE IF NOT EXISTS consumer_offsets (
            group_id TEXT NOT NULL,
            topic TEXT NOT NULL,
            partition INTEGER NOT NULL,
            next_offset INTEGER NOT NULL,
            recorded_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
            PRIMARY KEY (group_id, topic, partition));
        """

    /// Whether the ledger held any decision when it began recording offsets (``RecordedOffsets/startedEmpty``).
    private static let offsetsBaseline = """
        INSERT OR IGNORE INTO ledger_meta (key, value) VALUES ('offsets_baseline',
            CASE WHEN EXISTS (SELECT 1 FROM grants) OR EXISTS (SELECT 1 FROM results) THEN 'not_empty' ELSE 'empty' END);
        """

    /// The file keeps the bundle id of its default app (whose rows have app ""): opened with another
    /// `apple.bundle_id`, the default app's history would be read as another app's, and its purchases could be
    /// granted again. Recorded on first use; a mismatch is refused.
    static func checkDefaultApp(_ connection: SQLiteConnection, defaultBundleID: String?) throws {
        guard let defaultBundleID else { return }
        let recorded = try connection.first("SELECT value FROM ledger_meta WHERE key = 'default_app'") { $0.text(0) }
        if let recorded, let recorded {
            guard recorded == defaultBundleID else {
                throw LedgerError.defaultAppMismatch(recorded: recorded, configured: defaultBundleID)
            }
            return
        }
        try connection.query(
            "INSERT OR IGNORE INTO ledger_meta (key, value) VALUES ('default_app', ?1)", [.text(defaultBundleID)]
        ) { _ in }
    }

    private static func transaction(_ connection: SQLiteConnection, _ body: () throws -> Void) throws {
        try connection.execute("BEGIN IMMEDIATE")
        do {
            try body()
            try connection.execute("COMMIT")
        } catch {
            try? connection.execute("ROLLBACK")  // the original error is the one to report
            throw error
        }
    }

    /// Every table at the latest version. The triggers fill a row's derived columns from its event when a
    /// writer did not (the migration of an earlier file, a row written by hand): what replays and notifications
    /// read. An event that is not JSON (none should be, but a file may hold anything) leaves them NULL.
    static let tables = """
        \(grantsTable)
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
        CREATE TABLE consumption_requests (
            app TEXT NOT NULL DEFAULT '',
            environment TEXT NOT NULL DEFAULT 'Production',
            transaction_id TEXT NOT NULL,
            notification_id TEXT NOT NULL,
            respond_by TEXT NOT NULL,
            requested_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
            answered_at TEXT,
            PRIMARY KEY (app, environment, transaction_id));
        CREATE TABLE ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        \(consumerOffsets)
        CREATE TRIGGER results_event_columns AFTER INSERT ON results
            WHEN NEW.event_id IS NULL AND json_valid(CAST(NEW.event AS TEXT))
            BEGIN UPDATE results SET \(eventColumns) WHERE rowid = NEW.rowid; END;
        CREATE TRIGGER notifications_event_columns AFTER INSERT ON notifications
            WHEN NEW.event_id IS NULL AND json_valid(CAST(NEW.event AS TEXT))
            BEGIN UPDATE notifications SET \(eventColumns) WHERE rowid = NEW.rowid; END;

        """

    /// A stored event's id, type, time and key, from its JSON. Events stored before 0.4 have no `type`: their
    /// `decision` says it.
    private static let eventColumns = """
        event_id = json_extract(CAST(event AS TEXT), '$.event_id'),
            event_type = coalesce(json_extract(CAST(event AS TEXT), '$.type'),
                CASE json_extract(CAST(event AS TEXT), '$.decision')
                    WHEN 'grant' THEN 'receipt.granted' ELSE 'receipt.denied' END),
            event_time = coalesce(json_extract(CAST(event AS TEXT), '$.verified_at'),
                json_extract(CAST(event AS TEXT), '$.notified_at')),
            event_key = coalesce(json_extract(CAST(event AS TEXT), '$.order_id'), '')
        """

    /// A grant's order fields, from its event (grants recorded before 0.5 kept none: they stay NULL).
    private static let grantColumns = """
        user_id = json_extract(CAST(event AS TEXT), '$.user_id'),
            product_id = json_extract(CAST(event AS TEXT), '$.product_id'),
            quantity = json_extract(CAST(event AS TEXT), '$.quantity'),
            environment = coalesce(json_extract(CAST(event AS TEXT), '$.environment'), environment)
        """

    /// Version 3: every table rebuilt with its app, environment, fingerprint and derived columns; the rows
    /// copied over, each with the app its event names (the default app's rows, and those naming none, older
    /// than apps, get ""); purchase states and consumption requests the app and environment of their
    /// purchase's grant, and a state of a purchase never granted (a refund that came first) app and
    /// environment "*", which the grant's check of every app and environment reads. SQLite cannot change a table's keys in place. A release before this one cannot run on
    /// the migrated file (it looked jobs up by job id alone): go back by restoring the file's backup.
    private static func migrateToAppScope(_ connection: SQLiteConnection, defaultBundleID: String?) throws {
        let bundle =
            "CASE WHEN json_valid(CAST(event AS TEXT)) THEN json_extract(CAST(event AS TEXT), '$.bundle_id') END"
        let defaultLiteral = defaultBundleID.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" } ?? "NULL"
        let app = "CASE WHEN coalesce(\(bundle), '') IN ('', \(defaultLiteral)) THEN '' ELSE \(bundle) END"
        try connection.execute(
            """
            DROP TRIGGER IF EXISTS grants_fill_purchase_id;
            DROP INDEX IF EXISTS grants_purchase_id;
            DROP INDEX IF EXISTS results_decided_at;
            DROP INDEX IF EXISTS purchase_states_transaction_id;
            ALTER TABLE grants RENAME TO grants_v2;
            ALTER TABLE results RENAME TO results_v2;
            ALTER TABLE notifications RENAME TO notifications_v2;
            ALTER TABLE purchase_states RENAME TO purchase_states_v2;
            ALTER TABLE consumption_requests RENAME TO consumption_requests_v2;
            \(tables)
            INSERT INTO grants (app, transaction_id, order_id, purchase_id, event, revoked_at, granted_at)
                SELECT \(app), transaction_id, order_id, coalesce(purchase_id, transaction_id), event, revoked_at,
                    granted_at
                FROM grants_v2;
            INSERT INTO results (app, job_id, event, decided_at) SELECT \(app), job_id, event, decided_at FROM results_v2;
            INSERT INTO notifications (notification_id, event, handled_at)
                SELECT notification_id, event, handled_at FROM notifications_v2;
            INSERT INTO purchase_states (app, environment, purchase_id, transaction_id, revoked, changed_at)
                SELECT coalesce(g.app, '*'), coalesce(g.environment, '*'), s.purchase_id, s.transaction_id,
                    s.revoked, s.changed_at
                FROM purchase_states_v2 s LEFT JOIN grants g ON g.rowid = (SELECT rowid FROM grants
                    WHERE purchase_id = s.purchase_id OR transaction_id = s.transaction_id LIMIT 1);
            INSERT INTO consumption_requests (app, environment, transaction_id, notification_id, respond_by,
                    requested_at, answered_at)
                SELECT coalesce(g.app, ''), coalesce(g.environment, 'Production'), c.transaction_id, c.notification_id,
                    c.respond_by, c.requested_at, c.answered_at
                FROM consumption_requests_v2 c LEFT JOIN grants g ON g.rowid = (SELECT rowid FROM grants
                    WHERE transaction_id = c.transaction_id LIMIT 1);
            DROP TABLE grants_v2;
            DROP TABLE results_v2;
            DROP TABLE notifications_v2;
            DROP TABLE purchase_states_v2;
            DROP TABLE consumption_requests_v2;
            PRAGMA user_version = 3;
            """)
    }

    /// Version 2: the grant's event kept with it, its revocation, each App Store notification handled (once),
    /// open consumption requests, and the index pruning uses.
    private static func migrateToAfterGrant(_ connection: SQLiteConnection) throws {
        let columns = try columns(of: "grants", connection)
        if !columns.contains("event") { try connection.execute("ALTER TABLE grants ADD COLUMN event BLOB") }
        if !columns.contains("revoked_at") { try connection.execute("ALTER TABLE grants ADD COLUMN revoked_at TEXT") }
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS notifications (
                notification_id TEXT PRIMARY KEY,
                event BLOB,
                handled_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
            CREATE TABLE IF NOT EXISTS purchase_states (
                purchase_id TEXT PRIMARY KEY,
                transaction_id TEXT NOT NULL,
                revoked INTEGER NOT NULL,
                changed_at TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS consumption_requests (
                transaction_id TEXT PRIMARY KEY,
                notification_id TEXT NOT NULL,
                respond_by TEXT NOT NULL,
                requested_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
                answered_at TEXT);
            PRAGMA user_version = 2;
            """)
    }

    /// Version 1: the purchase identity (`grants.purchase_id`), filled for existing grants with their
    /// transaction id, which is the purchase identity of a consumable and of a first purchase.
    private static func migrateToPurchaseIdentity(_ connection: SQLiteConnection) throws {
        let columns = try columns(of: "grants", connection)
        if !columns.contains("purchase_id") { try connection.execute("ALTER TABLE grants ADD COLUMN purchase_id TEXT") }
        try connection.execute(
            """
            UPDATE grants SET purchase_id = transaction_id WHERE purchase_id IS NULL;
            PRAGMA user_version = 1;
            """)
    }

    /// The schema of the first release (version 0), for tests of the migrations.
    static let firstRelease = """
        CREATE TABLE grants (
            transaction_id TEXT PRIMARY KEY,
            order_id TEXT NOT NULL UNIQUE,
            granted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
        CREATE TABLE results (
            job_id TEXT PRIMARY KEY,
            event BLOB NOT NULL,
            decided_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
        """
}
