/// The PostgreSQL ledger's tables and functions, in a schema of their own (`ledger.schema`), as numbered
/// migrations. The worker applies what is missing at start-up; a DBA can apply them by hand instead
/// (`receipt-worker ledger migrate --print`) and let the worker run under a role that cannot create
/// anything. Every statement is idempotent, so the printed script can be run again safely.
public struct PostgresSchema: Sendable {
    public struct Migration: Sendable {
        public let version: Int
        public let description: String
        /// How it runs beside traffic (``MigrationStep``); migrations up to 9 are one transaction each.
        public let steps: [MigrationStep]

        public init(version: Int, description: String, steps: [MigrationStep]) {
            self.version = version
            self.description = description
            self.steps = steps
        }

        init(version: Int, description: String, statements: [String]) {
            self.init(version: version, description: description, steps: [.transaction(statements)])
        }

        /// The statements of its transactional steps (for tests that rebuild an old schema).
        var statements: [String] {
            steps.flatMap { step -> [String] in
                if case .transaction(let statements) = step { return statements }
                return []
            }
        }
    }

    /// A lower-case SQL identifier, so it is never quoted and never injected.
    public let name: String

    public static let defaultName = "receipt_worker"

    /// The default app's bundle id (`apple.bundle_id`): migration 6 gives each existing row the app its event
    /// names, the default app's rows (and rows naming none) the default app's scope, "". Needed only to
    /// migrate a ledger that has rows from before migration 6.
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
            VALUES (\(migration.version), '\(migration.description)') ON CONFLICT (version) DO NOTHING
        """
    }

    /// The record functions are always created at their latest: PL/pgSQL checks columns when a function
    /// runs, not when it is created, and all pending migrations apply in one transaction.
    public var migrations: [Migration] {
        [
            Migration(version: 1, description: "grants and results", statements: tables),
            Migration(version: 2, description: "purchase identity", statements: purchaseIdentity),
            // Retired: the record functions it made were replaced by migration 6's, and no release that runs
            // beside a migrated schema calls them.
            Migration(version: 3, description: "record functions", statements: ["SELECT 1"]),
            Migration(
                version: 4, description: "results retention",
                statements: ["CREATE INDEX IF NOT EXISTS results_decided_at ON \(name).results (decided_at)"]),
            Migration(version: 5, description: "after the grant: revocations, notifications", statements: afterGrant),
            Migration(
                version: 6, description: "keys scoped by app, purchases by environment, job fingerprints",
                statements: appScope),
            Migration(version: 7, description: "consumer group offsets", statements: consumerOffsets),
            Migration(version: 8, description: "subscriptions and purchases no job claimed", statements: purchaseLife),
            // A nullable column without a default: a catalog change, no row rewritten.
            Migration(
                version: 9, description: "the share of a purchase refunded",
                statements: ["ALTER TABLE \(name).purchase_states ADD COLUMN IF NOT EXISTS revoked_share INTEGER"]),
            Migration(
                version: 10, description: "year two: primary keys, retention indexes, the event stored once",
                steps: yearTwo),
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
            case .rows(let statement):
                .transaction([words.spell(statement)])
            case .postgresFunctions(let functions):
                .transaction(self[keyPath: functions])
            }
        }
    }

    /// Grants made without a job beside those of jobs (`credit`: `job`, `renewal` for a subscription's later
    /// period, `unclaimed` for a purchase Apple reported that no job claimed): an order holds one purchase of
    /// its jobs (the unique index becomes partial). Each subscription grant knows its subscription
    /// (`original_transaction_id`, from its event for the grants before). Subscriptions' states, and reported
    /// purchases waiting for a job (docs/contract.md section 9).
    private var purchaseLife: [String] {
        [
            "ALTER TABLE \(name).grants ADD COLUMN IF NOT EXISTS credit TEXT NOT NULL DEFAULT 'job'",
            "ALTER TABLE \(name).grants ADD COLUMN IF NOT EXISTS original_transaction_id TEXT",
            "ALTER TABLE \(name).grants ADD COLUMN IF NOT EXISTS credit_event_id TEXT",
            "DROP INDEX IF EXISTS \(name).grants_app_order",
            "CREATE UNIQUE INDEX IF NOT EXISTS grants_app_job_order ON \(name).grants (app, order_id) WHERE credit = 'job'",
            "CREATE INDEX IF NOT EXISTS grants_renewal_order ON \(name).grants (app, order_id) WHERE credit = 'renewal'",
            """
            CREATE INDEX IF NOT EXISTS grants_original ON \(name).grants (app, environment, original_transaction_id)
                WHERE original_transaction_id IS NOT NULL
            """,
            """
            UPDATE \(name).grants SET original_transaction_id = \(name).event_json(event)->>'original_transaction_id'
                WHERE purchase_id LIKE 'w:%' AND original_transaction_id IS NULL
            """,
            """
            CREATE OR REPLACE FUNCTION \(name).fill_grant_columns() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE
                v jsonb := \(name).event_json(NEW.event);
            BEGIN
                NEW.purchase_id := coalesce(NEW.purchase_id, NEW.transaction_id);
                IF NEW.environment IS NULL THEN
                    NEW.environment := coalesce(v->>'environment', 'Production');
                END IF;
                IF NEW.user_id IS NULL AND v IS NOT NULL THEN
                    NEW.user_id := v->>'user_id';
                    NEW.product_id := v->>'product_id';
                    NEW.quantity := (v->>'quantity')::integer;
                END IF;
                IF NEW.original_transaction_id IS NULL AND NEW.purchase_id LIKE 'w:%' AND v IS NOT NULL THEN
                    NEW.original_transaction_id := v->>'original_transaction_id';
                END IF;
                RETURN NEW;
            END
            $$
            """,
            """
            CREATE TABLE IF NOT EXISTS \(name).subscriptions (
                app TEXT NOT NULL,
                environment TEXT NOT NULL,
                original_transaction_id TEXT NOT NULL,
                status TEXT NOT NULL,
                expires_at TIMESTAMPTZ,
                grace_period_expires_at TIMESTAMPTZ,
                auto_renew BOOLEAN,
                auto_renew_product_id TEXT,
                changed_at TIMESTAMPTZ NOT NULL,
                PRIMARY KEY (app, environment, original_transaction_id))
            """,
            """
            CREATE TABLE IF NOT EXISTS \(name).unclaimed_purchases (
                app TEXT NOT NULL,
                environment TEXT NOT NULL,
                purchase_id TEXT NOT NULL,
                transaction_id TEXT NOT NULL,
                original_transaction_id TEXT,
                product_id TEXT NOT NULL,
                quantity INTEGER NOT NULL,
                due_at TIMESTAMPTZ NOT NULL,
                state TEXT NOT NULL DEFAULT 'waiting',
                published BOOLEAN NOT NULL DEFAULT false,
                event_id TEXT NOT NULL,
                event_type TEXT NOT NULL,
                event_time TEXT NOT NULL,
                event_key TEXT NOT NULL,
                event TEXT NOT NULL,
                reported_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                settled_at TIMESTAMPTZ,
                PRIMARY KEY (app, environment, purchase_id))
            """,
            """
            CREATE INDEX IF NOT EXISTS unclaimed_waiting ON \(name).unclaimed_purchases (due_at)
                WHERE state = 'waiting'
            """,
            """
            CREATE INDEX IF NOT EXISTS unclaimed_unpublished ON \(name).unclaimed_purchases (settled_at)
                WHERE NOT published AND state IN ('credited', 'tied')
            """,
            "CREATE INDEX IF NOT EXISTS unclaimed_event ON \(name).unclaimed_purchases (event_id)",
        ]
    }

    /// The offsets the worker is about to commit, recorded before each commit, and whether the ledger held any
    /// decision when it began recording them (``OffsetStore``).
    private var consumerOffsets: [String] {
        [
            """
            CREATE TABLE IF NOT EXISTS \(name).consumer_offsets (
                group_id TEXT NOT NULL,
                topic TEXT NOT NULL,
                partition INTEGER NOT NULL,
                next_offset BIGINT NOT NULL,
                recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                PRIMARY KEY (group_id, topic, partition))
            """,
            """
            INSERT INTO \(name).ledger_meta (key, value) VALUES ('offsets_baseline',
                CASE WHEN EXISTS (SELECT 1 FROM \(name).grants) OR EXISTS (SELECT 1 FROM \(name).results)
                    THEN 'not_empty' ELSE 'empty' END)
                ON CONFLICT DO NOTHING
            """,
        ]
    }

    /// The grant's event kept with it (a revocation names the granted order's user and product), its
    /// revocation, each purchase's last revoke or reinstate (`purchase_states`, also for a purchase not granted
    /// yet), each App Store notification handled (once), and consumption requests.
    private var afterGrant: [String] {
        [
            "ALTER TABLE \(name).grants ADD COLUMN IF NOT EXISTS event TEXT",
            "ALTER TABLE \(name).grants ADD COLUMN IF NOT EXISTS revoked_at TIMESTAMPTZ",
            """
            CREATE TABLE IF NOT EXISTS \(name).notifications (
                notification_id TEXT PRIMARY KEY,
                event TEXT,
                handled_at TIMESTAMPTZ NOT NULL DEFAULT now())
            """,
            """
            CREATE TABLE IF NOT EXISTS \(name).purchase_states (
                purchase_id TEXT PRIMARY KEY,
                transaction_id TEXT NOT NULL,
                revoked BOOLEAN NOT NULL,
                changed_at TIMESTAMPTZ NOT NULL)
            """,
            "CREATE INDEX IF NOT EXISTS purchase_states_transaction_id ON \(name).purchase_states (transaction_id)",
            """
            CREATE TABLE IF NOT EXISTS \(name).consumption_requests (
                transaction_id TEXT PRIMARY KEY,
                notification_id TEXT NOT NULL,
                respond_by TIMESTAMPTZ NOT NULL,
                requested_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                answered_at TIMESTAMPTZ)
            """,
        ]
    }

    /// Releases up to 0.3 kept the tables in the default schema (`public`): they move here, with their
    /// rows, and that release's functions go (its replicas, during a rolling update, fail their writes and
    /// retry until replaced: they never grant without the ledger).
    private var tables: [String] {
        [
            """
            DO $$
            DECLARE
                f regprocedure;
            BEGIN
                IF to_regclass('public.grants') IS NOT NULL AND to_regclass('\(name).grants') IS NULL THEN
                    ALTER TABLE public.grants SET SCHEMA \(name);
                END IF;
                IF to_regclass('public.results') IS NOT NULL AND to_regclass('\(name).results') IS NULL THEN
                    ALTER TABLE public.results SET SCHEMA \(name);
                END IF;
                FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                    WHERE n.nspname = 'public' AND p.proname LIKE 'receipt\\_worker\\_%'
                LOOP
                    EXECUTE 'DROP FUNCTION ' || f || ' CASCADE';
                END LOOP;
            END
            $$
            """,
            """
            CREATE TABLE IF NOT EXISTS \(name).grants (
                transaction_id TEXT PRIMARY KEY,
                order_id TEXT NOT NULL UNIQUE,
                granted_at TIMESTAMPTZ NOT NULL DEFAULT now())
            """,
            """
            CREATE TABLE IF NOT EXISTS \(name).results (
                job_id TEXT PRIMARY KEY,
                event TEXT NOT NULL,
                decided_at TIMESTAMPTZ NOT NULL DEFAULT now())
            """,
        ]
    }

    /// The purchase identity (a restore's new transaction id is the same purchase). Existing grants get their
    /// transaction id, which is the identity of a consumable and of a first purchase; so do grants inserted
    /// without one (by hand, or by an older writer), by trigger.
    private var purchaseIdentity: [String] {
        [
            "ALTER TABLE \(name).grants ADD COLUMN IF NOT EXISTS purchase_id TEXT",
            "UPDATE \(name).grants SET purchase_id = transaction_id WHERE purchase_id IS NULL",
            // Only before migration 6, which scopes purchases by app and environment (a script run again must
            // not bring the unscoped index back).
            """
            DO $$ BEGIN
                IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = '\(name)'
                    AND table_name = 'grants' AND column_name = 'app') THEN
                    CREATE UNIQUE INDEX IF NOT EXISTS grants_purchase_id ON \(name).grants (purchase_id);
                END IF;
            END $$
            """,
            """
            CREATE OR REPLACE FUNCTION \(name).fill_purchase_id() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                NEW.purchase_id := coalesce(NEW.purchase_id, NEW.transaction_id);
                RETURN NEW;
            END
            $$
            """,
            "DROP TRIGGER IF EXISTS grants_fill_purchase_id ON \(name).grants",
            """
            CREATE TRIGGER grants_fill_purchase_id BEFORE INSERT ON \(name).grants
                FOR EACH ROW EXECUTE FUNCTION \(name).fill_purchase_id()
            """,
        ]
    }
}

extension PostgresSchema {
    /// The ledger keeps the bundle id of its default app (whose rows have app ""): opened with another
    /// `apple.bundle_id` (a typo, another game's configuration), the default app's history would be read as
    /// another app's, and its purchases could be granted again. Recorded on first use; a mismatch is refused.
    func checkDefaultApp(on connection: PostgresConnection) throws {
        guard let defaultBundleID else { return }
        let recorded =
            try connection.query(
                "SELECT value FROM \(name).ledger_meta WHERE key = 'default_app'"
            ).first ?? nil
        if let recorded {
            guard recorded == defaultBundleID else {
                throw LedgerError.defaultAppMismatch(recorded: recorded, configured: defaultBundleID)
            }
            return
        }
        try connection.query(
            "INSERT INTO \(name).ledger_meta (key, value) VALUES ('default_app', $1) ON CONFLICT DO NOTHING",
            [defaultBundleID])
    }

}
