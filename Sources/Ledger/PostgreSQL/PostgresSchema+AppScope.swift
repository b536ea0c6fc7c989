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
            recordFunctionV3, recordBatchFunctionV3,
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

    /// The claim and the decision in one round trip, one transaction, scoped by app and environment. Each
    /// statement of a PL/pgSQL function takes a fresh snapshot under READ COMMITTED, so a grant committed
    /// meanwhile by another replica is seen (one SQL statement with CTEs would share a single snapshot and
    /// miss it). When another replica stored this job's decision meanwhile, the function raises: the grant it
    /// made rolls back, and the retry finds the stored answer.
    var recordFunctionV3: String {
        """
        CREATE OR REPLACE FUNCTION \(name).record_v3(p_app TEXT, p_job TEXT, p_fingerprint TEXT, p_transaction TEXT,
            p_order TEXT, p_purchase TEXT, p_environment TEXT, p_user TEXT, p_product TEXT, p_quantity INTEGER,
            p_event TEXT, p_event_id TEXT, p_event_type TEXT, p_event_time TEXT, p_event_key TEXT)
        RETURNS TABLE (outcome TEXT, stored TEXT, stored_id TEXT, stored_type TEXT, stored_time TEXT, stored_key TEXT)
        LANGUAGE plpgsql AS $$
        DECLARE
            v_stored RECORD;
            v_owner TEXT;
            v_transaction TEXT;
            v_credit TEXT;
        BEGIN
            SELECT r.event, r.event_id, r.event_type, r.event_time, r.event_key INTO v_stored FROM \(name).results r
                WHERE r.app = p_app AND r.job_id = p_job AND r.fingerprint IN (p_fingerprint, '')
                ORDER BY r.fingerprint = p_fingerprint DESC LIMIT 1;
            IF FOUND THEN
                RETURN QUERY SELECT 'replay'::TEXT, v_stored.event, v_stored.event_id, v_stored.event_type,
                    v_stored.event_time, v_stored.event_key;
                RETURN;
            END IF;
            IF p_transaction IS NOT NULL THEN
                -- One purchase's grant and its revocation never interleave (the notification side takes the
                -- same lock): a refund that lands first is seen here, a grant that lands first is revoked there.
                PERFORM pg_advisory_xact_lock(hashtext(p_app || chr(1) || p_environment || chr(1) || p_purchase));
                IF EXISTS (SELECT 1 FROM \(name).purchase_states
                    WHERE (app = p_app AND environment = p_environment OR app = '*')
                    AND (purchase_id = p_purchase OR transaction_id = p_transaction) AND revoked) THEN
                    RETURN QUERY SELECT 'revoked'::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT;
                    RETURN;
                END IF;
                INSERT INTO \(name).grants (app, environment, transaction_id, order_id, purchase_id, user_id,
                    product_id, quantity, event)
                    VALUES (p_app, p_environment, p_transaction, p_order, p_purchase, p_user, p_product, p_quantity,
                        p_event)
                    ON CONFLICT DO NOTHING;
                IF NOT FOUND THEN
                    -- Refunded or revoked since it was granted (an App Store notification): never again.
                    IF EXISTS (SELECT 1 FROM \(name).grants WHERE app = p_app AND environment = p_environment
                        AND (transaction_id = p_transaction OR purchase_id = p_purchase OR transaction_id = p_purchase)
                        AND revoked_at IS NOT NULL) THEN
                        RETURN QUERY SELECT 'revoked'::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT;
                        RETURN;
                    END IF;
                    -- Another order's grant of this transaction or purchase first, if there is one.
                    SELECT order_id, transaction_id, credit_event_id INTO v_owner, v_transaction, v_credit
                        FROM \(name).grants
                        WHERE app = p_app AND environment = p_environment
                            AND (transaction_id = p_transaction OR purchase_id = p_purchase OR transaction_id = p_purchase)
                        ORDER BY order_id = p_order, transaction_id = p_transaction DESC LIMIT 1;
                    IF FOUND AND v_owner <> p_order THEN
                        RETURN QUERY SELECT 'duplicate_transaction'::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT,
                            NULL::TEXT, NULL::TEXT;
                        RETURN;
                    ELSIF NOT FOUND OR v_transaction <> p_transaction THEN
                        RETURN QUERY SELECT 'order_already_fulfilled'::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT,
                            NULL::TEXT, NULL::TEXT;
                        RETURN;
                    ELSIF v_credit IS NOT NULL AND v_credit <> p_event_id THEN
                        -- A credit the worker made (a renewal, a tied unclaimed purchase): the job is that credit.
                        RETURN QUERY SELECT 'credited'::TEXT, NULL::TEXT, v_credit, NULL::TEXT, NULL::TEXT, NULL::TEXT;
                        RETURN;
                    END IF;
                END IF;
            END IF;
            INSERT INTO \(name).results (app, job_id, fingerprint, event, event_id, event_type, event_time, event_key)
                VALUES (p_app, p_job, p_fingerprint, p_event, p_event_id, p_event_type, p_event_time, p_event_key)
                ON CONFLICT (app, job_id, fingerprint) DO NOTHING;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'job % was decided concurrently', p_job USING ERRCODE = 'RW001';
            END IF;
            RETURN QUERY SELECT 'recorded'::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT;
        END
        $$
        """
    }

    /// The batch form of `record_v3`: one row per item, in order. Each item runs in a subtransaction, so an
    /// item that meets a concurrent decision (or a deadlock with another batch) rolls back alone and answers
    /// `conflict`, to be retried; the others are kept. Any other failure answers `error` with its SQLSTATE: it
    /// is not a race, and must not be retried as one.
    var recordBatchFunctionV3: String {
        """
        CREATE OR REPLACE FUNCTION \(name).record_batch_v3(p_apps TEXT[], p_jobs TEXT[], p_fingerprints TEXT[],
            p_transactions TEXT[], p_orders TEXT[], p_purchases TEXT[], p_environments TEXT[], p_users TEXT[],
            p_products TEXT[], p_quantities INTEGER[], p_events TEXT[], p_event_ids TEXT[], p_event_types TEXT[],
            p_event_times TEXT[], p_event_keys TEXT[])
        RETURNS TABLE (outcome TEXT, stored TEXT, stored_id TEXT, stored_type TEXT, stored_time TEXT, stored_key TEXT)
        LANGUAGE plpgsql AS $$
        BEGIN
            FOR i IN 1 .. coalesce(array_length(p_jobs, 1), 0) LOOP
                BEGIN
                    RETURN QUERY SELECT r.* FROM \(name).record_v3(p_apps[i], p_jobs[i], p_fingerprints[i],
                        p_transactions[i], p_orders[i], p_purchases[i], p_environments[i], p_users[i], p_products[i],
                        p_quantities[i], p_events[i], p_event_ids[i], p_event_types[i], p_event_times[i],
                        p_event_keys[i]) AS r;
                EXCEPTION
                    WHEN unique_violation OR deadlock_detected OR serialization_failure OR SQLSTATE 'RW001' THEN
                        RETURN QUERY SELECT 'conflict'::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT,
                            NULL::TEXT;
                    WHEN OTHERS THEN
                        RETURN QUERY SELECT 'error'::TEXT, SQLSTATE || ' ' || SQLERRM, NULL::TEXT, NULL::TEXT,
                            NULL::TEXT, NULL::TEXT;
                END;
            END LOOP;
        END
        $$
        """
    }
}
