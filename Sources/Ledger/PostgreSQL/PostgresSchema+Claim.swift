extension PostgresSchema {
    /// The stored results of a batch's jobs, read before anything is locked (a job answered before is answered
    /// again without its claim). Migration 10; 1.0.0 and this release call it.
    var storedResultsFunction: [String] {
        [
            """
            CREATE OR REPLACE FUNCTION \(name).stored_results(p_apps TEXT[], p_jobs TEXT[])
            RETURNS TABLE (app TEXT, job_id TEXT, fingerprint TEXT, event_id TEXT, event_type TEXT, event_time TEXT,
                event_key TEXT, event TEXT)
            LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
            BEGIN
                RETURN QUERY SELECT r.app, r.job_id, r.fingerprint, r.event_id, r.event_type, r.event_time,
                        r.event_key, r.event
                    FROM unnest(p_apps, p_jobs) AS k(app, job_id) CROSS JOIN LATERAL (SELECT * FROM \(name).results r
                        WHERE r.app = k.app AND r.job_id = k.job_id OFFSET 0) r;
            END
            $$
            """
        ]
    }

    /// The statements of a batch's claim (``ClaimRules`` decides; these only read and write), as functions so
    /// that each server connection plans them once and keeps the plan (an ad hoc statement is planned at every
    /// call: planning the facts cost more than running them), whatever pooler is in front: a function's plan
    /// is the server connection's, not the client's, unlike a prepared statement under PgBouncer.
    ///
    /// `claim_facts_v2` takes the advisory locks of the batch's purchases (in the order of their keys, so two
    /// batches never wait for each other in a circle; the notification side takes the same), then reads, with a
    /// snapshot of its own taken after the locks (each statement of a PL/pgSQL function takes one), what the
    /// ledger holds about the batch: stored results of its jobs, grants of its transactions, purchases and
    /// orders, and refunds of its purchases. Each an equality on one index, probed per key, whatever the
    /// statistics say: a plan made while the tables were empty is kept (until autovacuum first analyzes them, a
    /// minute or more into a launch), and must not scan whole tables per batch once they hold millions of rows.
    /// So each probe is a LATERAL subquery fenced by `OFFSET 0` (planned on its own, with the key as its
    /// parameter: never flattened into a join that the planner, believing the table empty, would run as a loop
    /// over a whole index; measured: 400 ms a batch after 20,000 jobs on a fresh ledger), each names the
    /// leading column of exactly one index, and `enable_seqscan = off` for these functions alone.
    /// From migration 11 the facts add what each grant's sale counted (`revenue`) and, for each refund
    /// remembered, its share and Apple's time (a purchase refunded in part before it was granted is granted for
    /// what was kept); the write stores each grant's revenue and, for such a purchase, its revocation. (Migration
    /// 10's `claim_facts` and `claim_write`, without revenue, were dropped by migration 16.)
    var claimFunctionsV2: [String] {
        [claimFactsV2(legacyRefunds: "s.app = '*'"), claimWriteV2]
    }

    /// Migration 20: `claim_facts_v2` finding the refunds remembered before the ledger had apps by their whole key.
    /// The migration that gave it apps (a release before 1.0.0) left them with app and environment `*`; naming the
    /// app alone made each probe read every such row (with 50,000 of them, 3.9 ms a probe, 0.03 with the
    /// environment named), for every purchase of every batch. Its columns and arguments are 1.0.0's, which calls it
    /// too.
    var legacyRefundsByKey: [String] {
        [claimFactsV2(legacyRefunds: "s.app = '*' AND s.environment = '*'")]
    }

    /// `claim_facts_v2` with `legacyRefunds`, the condition that picks the refunds recorded before apps.
    private func claimFactsV2(legacyRefunds: String) -> String {
        """
        CREATE OR REPLACE FUNCTION \(name).claim_facts_v2(p_locks TEXT[], p_job_apps TEXT[], p_jobs TEXT[],
            p_apps TEXT[], p_environments TEXT[], p_transactions TEXT[], p_purchases TEXT[], p_orders TEXT[])
        RETURNS TABLE (kind TEXT, c1 TEXT, c2 TEXT, c3 TEXT, c4 TEXT, c5 TEXT, c6 TEXT, c7 TEXT, c8 TEXT, c9 TEXT)
        LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest(p_locks) AS k
                ORDER BY 1) AS l;
            RETURN QUERY
            WITH j AS (SELECT DISTINCT * FROM unnest(p_job_apps, p_jobs) AS j(app, job)),
            c AS (SELECT DISTINCT * FROM unnest(p_apps, p_environments, p_transactions, p_purchases, p_orders)
                AS c(app, env, tx, purchase, ord)),
            g AS (
                SELECT x.* FROM c CROSS JOIN LATERAL (SELECT * FROM \(name).grants g
                    WHERE g.transaction_id = c.tx AND g.app = c.app AND g.environment = c.env OFFSET 0) x
                UNION ALL SELECT x.* FROM c CROSS JOIN LATERAL (SELECT * FROM \(name).grants g
                    WHERE g.transaction_id = c.purchase AND g.app = c.app AND g.environment = c.env OFFSET 0) x
                    WHERE c.purchase <> c.tx
                UNION ALL SELECT x.* FROM c CROSS JOIN LATERAL (SELECT * FROM \(name).grants g
                    WHERE g.app = c.app AND g.environment = c.env AND g.purchase_id = c.purchase OFFSET 0) x
                UNION ALL SELECT x.* FROM c CROSS JOIN LATERAL (SELECT * FROM \(name).grants g
                    WHERE g.app = c.app AND g.order_id = c.ord AND g.credit = 'job' OFFSET 0) x),
            s AS (
                SELECT x.* FROM c CROSS JOIN LATERAL (SELECT * FROM \(name).purchase_states s
                    WHERE s.app = c.app AND s.environment = c.env AND s.purchase_id = c.purchase AND s.revoked OFFSET 0) x
                UNION ALL SELECT x.* FROM c CROSS JOIN LATERAL (SELECT * FROM \(name).purchase_states s
                    WHERE s.app = c.app AND s.environment = c.env AND s.transaction_id = c.tx AND s.revoked OFFSET 0) x
                UNION ALL SELECT x.* FROM c CROSS JOIN LATERAL (SELECT * FROM \(name).purchase_states s
                    WHERE \(legacyRefunds) AND (s.purchase_id = c.purchase OR s.transaction_id = c.tx) AND s.revoked OFFSET 0) x)
            SELECT 'r', r.app, r.job_id, r.fingerprint, r.event_id, r.event_type, r.event_time, r.event_key, r.event,
                NULL::text
                FROM j CROSS JOIN LATERAL (SELECT * FROM \(name).results r WHERE r.app = j.app AND r.job_id = j.job OFFSET 0) r
            UNION ALL
            SELECT 'g', g.app, g.environment, g.transaction_id, g.purchase_id, g.order_id, (g.credit = 'job')::text,
                g.credit_event_id, (g.revoked_at IS NOT NULL)::text, g.revenue::text FROM g
            UNION ALL
            SELECT 's', s.app, s.environment, s.purchase_id, s.transaction_id, s.revoked_share::text,
                extract(epoch FROM s.changed_at)::text, NULL, NULL, NULL FROM s;
        END
        $$
        """
    }

    private var claimWriteV2: String {
        """
        CREATE OR REPLACE FUNCTION \(name).claim_write_v2(g_apps TEXT[], g_environments TEXT[],
            g_transactions TEXT[], g_orders TEXT[], g_purchases TEXT[], g_users TEXT[], g_products TEXT[],
            g_quantities INTEGER[], g_originals TEXT[], g_revenues BIGINT[], g_revoked_at DOUBLE PRECISION[],
            r_apps TEXT[], r_jobs TEXT[], r_fingerprints TEXT[], r_events TEXT[], r_event_ids TEXT[],
            r_event_types TEXT[], r_event_times TEXT[], r_event_keys TEXT[])
        RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
        BEGIN
            INSERT INTO \(name).grants (app, environment, transaction_id, order_id, purchase_id, user_id,
                    product_id, quantity, original_transaction_id, revenue, revoked_at)
                SELECT a, e, t, o, p, u, pr, q, orig, rev, to_timestamp(rv) FROM unnest(g_apps, g_environments,
                    g_transactions, g_orders, g_purchases, g_users, g_products, g_quantities, g_originals,
                    g_revenues, g_revoked_at) AS w(a, e, t, o, p, u, pr, q, orig, rev, rv);
            INSERT INTO \(name).results (app, job_id, fingerprint, event, event_id, event_type, event_time,
                    event_key)
                SELECT * FROM unnest(r_apps, r_jobs, r_fingerprints, r_events, r_event_ids, r_event_types,
                    r_event_times, r_event_keys);
        END
        $$
        """
    }

    /// Migration 16: what only releases before 1.0.0 called, which 1.0.0 (the previous release, the one the
    /// upgrade drill runs beside this one) and this release never call: the claim functions of migration 10
    /// (`claim_facts`, `claim_write`; 1.0.0 calls their `_v2`), 0.3.0's `record_v3` and `record_batch_v3`, the
    /// trigger that filled in what `record_v3` left out of a grant (a PL/pgSQL function run on every grant's
    /// insert, for writers that no longer exist), and `fill_purchase_id`, whose trigger migration 9 dropped. A new
    /// ledger never had them. Every overload by name (`DROP FUNCTION` needs the argument types; a name alone fails
    /// once two exist). Dropping the trigger takes the grants' table lock for a moment, under the migrations' lock
    /// timeout, retried.
    var beforeOneDrops: [String] {
        [
            "DROP TRIGGER IF EXISTS grants_fill_columns ON \(name).grants",
            """
            DO $$
            DECLARE
                f regprocedure;
            BEGIN
                FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                    WHERE n.nspname = '\(name)'
                        AND p.proname IN ('fill_grant_columns', 'fill_purchase_id', 'record_batch_v3', 'record_v3',
                            'claim_facts', 'claim_write')
                LOOP
                    EXECUTE 'DROP FUNCTION ' || f;
                END LOOP;
            END
            $$
            """,
        ]
    }
}
