extension PostgresSchema {
    /// What a notification finds (``PostgresDialect/purchaseFacts(_:in:)``), in one statement: whether it was
    /// handled; if not, the purchase's lock (`p_lock`, when given: the claim takes the same), then, read after it
    /// with a snapshot of its own (each statement of a PL/pgSQL function takes one), the purchase's grant (of the
    /// transaction named first, as ``PurchaseStatements/grant(of:transactionID:)``) and, when `p_state`, its last
    /// revoke or reinstate, its row locked. Each read an equality on one index, planned once per server
    /// connection (as ``claimFunctionsV2``). Its columns are fixed once installed (`CREATE OR REPLACE` cannot change
    /// a function's result type): facts it must return one day are a new function beside it, as the claim's v2.
    var purchaseFactsFunction: [String] {
        [
            """
            CREATE OR REPLACE FUNCTION \(name).purchase_facts(p_notification TEXT, p_lock TEXT, p_app TEXT, p_env TEXT,
                p_tx TEXT, p_purchase TEXT, p_state BOOLEAN)
            RETURNS TABLE (fact TEXT, c1 TEXT, c2 TEXT, c3 TEXT, c4 TEXT, c5 TEXT, c6 TEXT, c7 TEXT, c8 TEXT, c9 TEXT,
                c10 TEXT, c11 TEXT)
            LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
            BEGIN
                RETURN QUERY SELECT 'n', n.event_id, n.event_type, n.event_time, n.event_key, n.event,
                    NULL, NULL, NULL, NULL, NULL, NULL
                    FROM \(name).notifications n WHERE n.notification_id = p_notification;
                IF FOUND OR p_purchase IS NULL THEN RETURN; END IF;
                IF p_lock IS NOT NULL THEN PERFORM pg_advisory_xact_lock(hashtext(p_lock)); END IF;
                RETURN QUERY SELECT 'g', g.app, g.environment, g.order_id, g.transaction_id, coalesce(g.user_id, ''),
                    coalesce(g.product_id, ''), coalesce(g.quantity, 1)::text, (g.revoked_at IS NOT NULL)::text,
                    (SELECT extract(epoch FROM c.respond_by)::text FROM \(name).consumption_requests c
                        WHERE c.app = g.app AND c.environment = g.environment AND c.transaction_id = p_tx),
                    g.revenue::text,
                    (SELECT coalesce(s.revoked_share, 100000)::text FROM \(name).purchase_states s WHERE s.app = g.app
                        AND s.environment = g.environment AND s.purchase_id = g.purchase_id AND s.revoked)
                    FROM (SELECT x.*, 0 AS rank FROM \(name).grants x
                            WHERE x.transaction_id = p_tx AND x.app = p_app AND x.environment = p_env
                        UNION ALL SELECT x.*, 1 FROM \(name).grants x
                            WHERE x.app = p_app AND x.environment = p_env AND x.purchase_id IN (p_tx, p_purchase)
                        ORDER BY rank LIMIT 1) g;
                IF p_state THEN
                    RETURN QUERY SELECT 's', s.revoked::text, extract(epoch FROM s.changed_at)::text,
                        s.revoked_share::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
                        FROM \(name).purchase_states s
                        WHERE s.app = p_app AND s.environment = p_env AND s.purchase_id = p_purchase FOR UPDATE;
                END IF;
            END
            $$
            """
        ]
    }
}
