extension PostgresSchema {
    /// The migrations of releases up to 1.0.0, in the order they were applied: a new ledger records them all,
    /// as a ledger 1.0.0 migrated does, so that 1.0.0 running beside it (a rolling update) finds nothing missing.
    static let baselineMigrations = [
        (1, "grants and results"), (2, "purchase identity"), (3, "record functions"), (4, "results retention"),
        (5, "after the grant: revocations, notifications"),
        (6, "keys scoped by app, purchases by environment, job fingerprints"), (7, "consumer group offsets"),
        (8, "subscriptions and purchases no job claimed"), (9, "the share of a purchase refunded"),
        (10, "year two: primary keys, retention indexes, the event stored once"),
        (11, "what each sale counted as revenue"),
    ]

    /// With no migration recorded: whether a ledger's tables are here all the same, or those of a release up to 0.3
    /// sit in the database's default schema (`public`). A ledger of a release before 1.0.0 either way, never to be
    /// made again beside its rows.
    var hasUnversionedTables: String {
        """
        to_regclass('\(name).grants') IS NOT NULL
            OR (to_regclass('public.grants') IS NOT NULL AND to_regclass('public.results') IS NOT NULL)
        """
    }

    /// The ledger of 1.0.0 (migration 11), made at once on a new database: what a ledger migrated by every release
    /// up to 1.0.0 holds (the upgrade drill compares the two, `scripts/test-upgrade.sh`). The first statement
    /// refuses a ledger of a release before 1.0.0 where the printed script runs it (the worker refuses it before:
    /// ``LedgerError/beforeBaseline(_:)``).
    var baseline: [String] {
        let now = "TIMESTAMPTZ NOT NULL DEFAULT now()"
        return [
            """
            DO $$ BEGIN
                IF (EXISTS (SELECT 1 FROM \(name).schema_migrations) AND NOT EXISTS (SELECT 1 FROM
                        \(name).schema_migrations WHERE version = \(LedgerMigrations.baseline)))
                    OR (NOT EXISTS (SELECT 1 FROM \(name).schema_migrations) AND (\(hasUnversionedTables)))
                THEN
                    RAISE EXCEPTION '%', $m$\(LedgerError.beforeBaseline("schema \(name)").reason)$m$;
                END IF;
            END $$
            """,
            // A stored event as JSON, NULL when it is not (a row written by hand may hold anything).
            """
            CREATE OR REPLACE FUNCTION \(name).event_json(p_event TEXT) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
            BEGIN
                RETURN p_event::jsonb;
            EXCEPTION WHEN others THEN
                RETURN NULL;
            END
            $$
            """,
            // Grants: of jobs (`credit` `job`), of a subscription's later periods (`renewal`, to the subscription's
            // order) and of purchases no job claimed (`unclaimed`, until a job ties them to its order). The columns
            // in the order the releases up to 1.0.0 added them.
            """
            CREATE TABLE IF NOT EXISTS \(name).grants (
                transaction_id TEXT NOT NULL,
                order_id TEXT NOT NULL,
                granted_at \(now),
                purchase_id TEXT NOT NULL,
                event TEXT,
                revoked_at TIMESTAMPTZ,
                app TEXT NOT NULL DEFAULT '',
                environment TEXT NOT NULL DEFAULT 'Production',
                user_id TEXT,
                product_id TEXT,
                quantity INTEGER,
                credit TEXT NOT NULL DEFAULT 'job',
                original_transaction_id TEXT,
                credit_event_id TEXT,
                revenue BIGINT,
                CONSTRAINT grants_app_purchase PRIMARY KEY (app, environment, purchase_id))
            """,
            // A transaction id first: each probe of the claim has one index whose leading column it names, so a
            // plan made while the tables were empty (a connection's generic plan) still probes by key later.
            "CREATE UNIQUE INDEX IF NOT EXISTS grants_transaction ON \(name).grants (transaction_id, app, environment)",
            """
            CREATE UNIQUE INDEX IF NOT EXISTS grants_app_job_order ON \(name).grants (app, order_id)
                WHERE credit = 'job'
            """,
            """
            CREATE INDEX IF NOT EXISTS grants_renewal_order ON \(name).grants (app, order_id)
                WHERE credit = 'renewal'
            """,
            """
            CREATE INDEX IF NOT EXISTS grants_original ON \(name).grants (app, environment, original_transaction_id)
                WHERE original_transaction_id IS NOT NULL
            """,
            """
            CREATE TABLE IF NOT EXISTS \(name).results (
                job_id TEXT NOT NULL,
                event TEXT NOT NULL,
                decided_at \(now),
                app TEXT NOT NULL DEFAULT '',
                fingerprint TEXT NOT NULL DEFAULT '',
                event_id TEXT,
                event_type TEXT,
                event_time TEXT,
                event_key TEXT,
                CONSTRAINT results_app_job PRIMARY KEY (app, job_id, fingerprint))
            """,
            "CREATE INDEX IF NOT EXISTS results_decided_at ON \(name).results (decided_at)",
            // Each App Store notification handled, once.
            """
            CREATE TABLE IF NOT EXISTS \(name).notifications (
                notification_id TEXT PRIMARY KEY,
                event TEXT,
                handled_at \(now),
                event_id TEXT,
                event_type TEXT,
                event_time TEXT,
                event_key TEXT)
            """,
            "CREATE INDEX IF NOT EXISTS notifications_handled_at ON \(name).notifications (handled_at)",
            // Each purchase's last revoke or reinstate, also of a purchase not granted yet (app and environment "*").
            """
            CREATE TABLE IF NOT EXISTS \(name).purchase_states (
                purchase_id TEXT NOT NULL,
                transaction_id TEXT NOT NULL,
                revoked BOOLEAN NOT NULL,
                changed_at TIMESTAMPTZ NOT NULL,
                app TEXT NOT NULL DEFAULT '',
                environment TEXT NOT NULL DEFAULT 'Production',
                revoked_share INTEGER,
                CONSTRAINT purchase_states_app_purchase PRIMARY KEY (app, environment, purchase_id))
            """,
            """
            CREATE INDEX IF NOT EXISTS purchase_states_transaction ON \(name).purchase_states
                (transaction_id, app, environment)
            """,
            "CREATE INDEX IF NOT EXISTS purchase_states_changed_at ON \(name).purchase_states (changed_at)",
            """
            CREATE TABLE IF NOT EXISTS \(name).consumption_requests (
                transaction_id TEXT NOT NULL,
                notification_id TEXT NOT NULL,
                respond_by TIMESTAMPTZ NOT NULL,
                requested_at \(now),
                answered_at TIMESTAMPTZ,
                app TEXT NOT NULL DEFAULT '',
                environment TEXT NOT NULL DEFAULT 'Production',
                CONSTRAINT consumption_requests_app_transaction PRIMARY KEY (app, environment, transaction_id))
            """,
            "CREATE INDEX IF NOT EXISTS consumption_requests_respond_by ON \(name).consumption_requests (respond_by)",
            // What the ledger knows of itself: the default app's bundle id (checkDefaultApp), whether it held any
            // decision when it began recording the consumer group's offsets (``OffsetStore``).
            "CREATE TABLE IF NOT EXISTS \(name).ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            """
            CREATE TABLE IF NOT EXISTS \(name).consumer_offsets (
                group_id TEXT NOT NULL,
                topic TEXT NOT NULL,
                partition INTEGER NOT NULL,
                next_offset BIGINT NOT NULL,
                recorded_at \(now),
                PRIMARY KEY (group_id, topic, partition))
            """,
            """
            INSERT INTO \(name).ledger_meta (key, value) VALUES ('offsets_baseline',
                CASE WHEN EXISTS (SELECT 1 FROM \(name).grants) OR EXISTS (SELECT 1 FROM \(name).results)
                    THEN 'not_empty' ELSE 'empty' END)
                ON CONFLICT DO NOTHING
            """,
            // Subscriptions' states (the newest notification's, by `signedDate`).
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
            // Purchases Apple reported that wait for a job (`waiting`) until `due_at`, then end `claimed`,
            // `refunded` or `credited` (and `tied` once a job claims the credit); `published` once the credit's
            // event is acknowledged.
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
                reported_at \(now),
                settled_at TIMESTAMPTZ,
                revenue BIGINT,
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
            """
            CREATE INDEX IF NOT EXISTS unclaimed_settled ON \(name).unclaimed_purchases (settled_at)
                WHERE state <> 'waiting'
            """,
            """
            INSERT INTO \(name).schema_migrations (version, description) VALUES
                \(Self.baselineMigrations.map { "(\($0.0), \(Self.literal($0.1)))" }.joined(separator: ", "))
                ON CONFLICT (version) DO NOTHING
            """,
        ] + storedResultsFunction + claimFunctionsV2
    }
}
