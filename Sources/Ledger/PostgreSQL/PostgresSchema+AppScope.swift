import Foundation

extension PostgresSchema {
    /// Migration 6: every key scoped by app, purchases and their states by environment, job fingerprints, and
    /// stored events' id, type, time and key in columns. Each existing row gets the app its event names
    /// (`bundle_id`, in every event since apps came), the default app's rows and those naming none (older than
    /// apps) the default app's scope, ""; purchase states and consumption requests the app and environment of
    /// their purchase's grant, and a state of a purchase never granted (a refund that came first) app and
    /// environment "*", which the grant's check of every app and environment reads. Idempotent: each step checks what is there. On a large ledger the UPDATEs of
    /// existing rows take a while, in the migration's one transaction: run `receipt-worker ledger migrate`
    /// before the rollout (README, "Upgrading a ledger written before apps were scoped").
    ///
    /// The previous release must not run beside this schema: it looked jobs up by job id alone. Its record
    /// functions are dropped, so a replica of it still running fails its decisions (they are retried by the
    /// new replicas) instead of deciding in the wrong scope.
    var appScope: [String] {
        [
            """
            CREATE OR REPLACE FUNCTION \(name).event_json(p_event TEXT) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
            BEGIN
                RETURN p_event::jsonb;
            EXCEPTION WHEN others THEN
                RETURN NULL;
            END
            $$
            """,
            // grants
            "ALTER TABLE \(name).grants ADD COLUMN IF NOT EXISTS app TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE \(name).grants ADD COLUMN IF NOT EXISTS environment TEXT",
            "ALTER TABLE \(name).grants ADD COLUMN IF NOT EXISTS user_id TEXT",
            "ALTER TABLE \(name).grants ADD COLUMN IF NOT EXISTS product_id TEXT",
            "ALTER TABLE \(name).grants ADD COLUMN IF NOT EXISTS quantity INTEGER",
            """
            UPDATE \(name).grants SET app = \(appOf("event")),
                environment = coalesce(\(name).event_json(event)->>'environment', 'Production'),
                user_id = \(name).event_json(event)->>'user_id', product_id = \(name).event_json(event)->>'product_id',
                quantity = (\(name).event_json(event)->>'quantity')::integer
                WHERE environment IS NULL
            """,
            "ALTER TABLE \(name).grants ALTER COLUMN environment SET DEFAULT 'Production'",
            "ALTER TABLE \(name).grants ALTER COLUMN environment SET NOT NULL",
            "ALTER TABLE \(name).grants DROP CONSTRAINT IF EXISTS grants_pkey",
            "ALTER TABLE \(name).grants DROP CONSTRAINT IF EXISTS grants_order_id_key",
            "DROP INDEX IF EXISTS \(name).grants_purchase_id",
            "ALTER TABLE \(name).grants ALTER COLUMN transaction_id SET NOT NULL",
            "CREATE UNIQUE INDEX IF NOT EXISTS grants_app_order ON \(name).grants (app, order_id)",
            "CREATE UNIQUE INDEX IF NOT EXISTS grants_app_purchase ON \(name).grants (app, environment, purchase_id)",
            """
            CREATE UNIQUE INDEX IF NOT EXISTS grants_app_transaction ON \(name).grants (app, environment, transaction_id)
            """,
            "CREATE INDEX IF NOT EXISTS grants_transaction_id ON \(name).grants (transaction_id)",
            // results
            "ALTER TABLE \(name).results ADD COLUMN IF NOT EXISTS app TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE \(name).results ADD COLUMN IF NOT EXISTS fingerprint TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE \(name).results ADD COLUMN IF NOT EXISTS event_id TEXT",
            "ALTER TABLE \(name).results ADD COLUMN IF NOT EXISTS event_type TEXT",
            "ALTER TABLE \(name).results ADD COLUMN IF NOT EXISTS event_time TEXT",
            "ALTER TABLE \(name).results ADD COLUMN IF NOT EXISTS event_key TEXT",
            "UPDATE \(name).results SET app = \(appOf("event")), \(eventColumns) WHERE event_id IS NULL",
            "ALTER TABLE \(name).results DROP CONSTRAINT IF EXISTS results_pkey",
            "CREATE UNIQUE INDEX IF NOT EXISTS results_app_job ON \(name).results (app, job_id, fingerprint)",
            // notifications
            "ALTER TABLE \(name).notifications ADD COLUMN IF NOT EXISTS event_id TEXT",
            "ALTER TABLE \(name).notifications ADD COLUMN IF NOT EXISTS event_type TEXT",
            "ALTER TABLE \(name).notifications ADD COLUMN IF NOT EXISTS event_time TEXT",
            "ALTER TABLE \(name).notifications ADD COLUMN IF NOT EXISTS event_key TEXT",
            "UPDATE \(name).notifications SET \(eventColumns) WHERE event_id IS NULL AND event IS NOT NULL",
            // purchase states and consumption requests
            "ALTER TABLE \(name).purchase_states ADD COLUMN IF NOT EXISTS app TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE \(name).purchase_states ADD COLUMN IF NOT EXISTS environment TEXT NOT NULL DEFAULT 'Production'",
            "ALTER TABLE \(name).purchase_states DROP CONSTRAINT IF EXISTS purchase_states_pkey",
            // Once, before the new keys exist: a state takes its purchase's grant's app and environment.
            """
            DO $$ BEGIN
                IF to_regclass('\(name).purchase_states_app_purchase') IS NULL THEN
                    UPDATE \(name).purchase_states s SET app = g.app, environment = g.environment
                        FROM \(name).grants g WHERE g.purchase_id = s.purchase_id OR g.transaction_id = s.transaction_id;
                    -- A refund remembered before its grant, of an app nobody can tell now: every app's.
                    UPDATE \(name).purchase_states s SET app = '*', environment = '*' WHERE NOT EXISTS (
                        SELECT 1 FROM \(name).grants g
                        WHERE g.purchase_id = s.purchase_id OR g.transaction_id = s.transaction_id);
                END IF;
            END $$
            """,
            "DROP INDEX IF EXISTS \(name).purchase_states_transaction_id",
            """
            CREATE UNIQUE INDEX IF NOT EXISTS purchase_states_app_purchase
                ON \(name).purchase_states (app, environment, purchase_id)
            """,
            """
            CREATE INDEX IF NOT EXISTS purchase_states_app_transaction
                ON \(name).purchase_states (app, environment, transaction_id)
            """,
            "ALTER TABLE \(name).consumption_requests ADD COLUMN IF NOT EXISTS app TEXT NOT NULL DEFAULT ''",
            """
            ALTER TABLE \(name).consumption_requests ADD COLUMN IF NOT EXISTS environment TEXT NOT NULL DEFAULT 'Production'
            """,
            "ALTER TABLE \(name).consumption_requests DROP CONSTRAINT IF EXISTS consumption_requests_pkey",
            """
            DO $$ BEGIN
                IF to_regclass('\(name).consumption_requests_app_transaction') IS NULL THEN
                    UPDATE \(name).consumption_requests c SET app = g.app, environment = g.environment
                        FROM \(name).grants g WHERE g.transaction_id = c.transaction_id;
                END IF;
            END $$
            """,
            """
            CREATE UNIQUE INDEX IF NOT EXISTS consumption_requests_app_transaction
                ON \(name).consumption_requests (app, environment, transaction_id)
            """,
            // Rows a writer of the previous release inserts get their columns from their event.
            """
            CREATE OR REPLACE FUNCTION \(name).fill_event_columns() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE
                v jsonb := \(name).event_json(NEW.event);
            BEGIN
                IF NEW.event_id IS NULL AND v IS NOT NULL THEN
                    NEW.event_id := v->>'event_id';
                    NEW.event_type := coalesce(v->>'type',
                        CASE v->>'decision' WHEN 'grant' THEN 'receipt.granted' ELSE 'receipt.denied' END);
                    NEW.event_time := coalesce(v->>'verified_at', v->>'notified_at');
                    NEW.event_key := coalesce(v->>'order_id', '');
                END IF;
                RETURN NEW;
            END
            $$
            """,
            "DROP TRIGGER IF EXISTS results_event_columns ON \(name).results",
            """
            CREATE TRIGGER results_event_columns BEFORE INSERT ON \(name).results
                FOR EACH ROW EXECUTE FUNCTION \(name).fill_event_columns()
            """,
            "DROP TRIGGER IF EXISTS notifications_event_columns ON \(name).notifications",
            """
            CREATE TRIGGER notifications_event_columns BEFORE INSERT OR UPDATE ON \(name).notifications
                FOR EACH ROW EXECUTE FUNCTION \(name).fill_event_columns()
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
                RETURN NEW;
            END
            $$
            """,
            "DROP TRIGGER IF EXISTS grants_fill_purchase_id ON \(name).grants",
            "DROP TRIGGER IF EXISTS grants_fill_columns ON \(name).grants",
            """
            CREATE TRIGGER grants_fill_columns BEFORE INSERT ON \(name).grants
                FOR EACH ROW EXECUTE FUNCTION \(name).fill_grant_columns()
            """,
            // What the ledger knows of itself: the default app's bundle id (checkDefaultApp).
            "CREATE TABLE IF NOT EXISTS \(name).ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            defaultBundleID.map {
                "INSERT INTO \(name).ledger_meta (key, value) VALUES ('default_app', \(Self.literal($0))) ON CONFLICT DO NOTHING"
            } ?? "SELECT 1",
            "DROP FUNCTION IF EXISTS \(name).record_batch_v2(TEXT[], TEXT[], TEXT[], TEXT[], TEXT[])",
            "DROP FUNCTION IF EXISTS \(name).record_v2(TEXT, TEXT, TEXT, TEXT, TEXT)",
        ]
    }

    /// The app of a row from before migration 6, from its event: "" for the default app's and for one naming
    /// no app.
    private func appOf(_ event: String) -> String {
        let bundle = "\(name).event_json(\(event))->>'bundle_id'"
        return "CASE WHEN coalesce(\(bundle), '') IN ('', \(Self.literal(defaultBundleID))) THEN '' ELSE \(bundle) END"
    }

    /// A SQL string literal (standard_conforming_strings, on since PostgreSQL 9.1: only quotes are special);
    /// NULL for nil.
    static func literal(_ text: String?) -> String {
        guard let text else { return "NULL" }
        return "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }

    /// A stored event's id, type, time and key, from its JSON (events before 0.4 have no `type`: their
    /// `decision` says it).
    private var eventColumns: String {
        """
        event_id = \(name).event_json(event)->>'event_id',
            event_type = coalesce(\(name).event_json(event)->>'type',
                CASE \(name).event_json(event)->>'decision' WHEN 'grant' THEN 'receipt.granted' ELSE 'receipt.denied' END),
            event_time = coalesce(\(name).event_json(event)->>'verified_at', \(name).event_json(event)->>'notified_at'),
            event_key = coalesce(\(name).event_json(event)->>'order_id', '')
        """
    }
}
