-- Grants from :from to :to (exclusive) of a big game's year, written with set-based SQL, and what the ledger holds
-- beside them at its retention's steady state: results of the last 30 days (a year's grants at a steady rate,
-- plus one deny in ten), notifications of the last 200 days (0.15 a grant a year: renewals, refunds, requests),
-- a refund's purchase state for 1 % of grants, a subscription's state for 1 %. Events are copies of a real
-- stored event, so their bytes are the worker's. Order and job ids are random UUIDs, as a game's backend makes them
-- (an index on them is written at random places, as in production), players one of a million.
-- psql -v from=N -v to=M -f scripts/lib/prefill-postgres.sql
\set ON_ERROR_STOP on
SET synchronous_commit = off;
CREATE TEMP TABLE sample AS SELECT event FROM receipt_worker.results WHERE event_type = 'receipt.granted' LIMIT 1;

INSERT INTO receipt_worker.grants (app, environment, transaction_id, order_id, purchase_id, user_id, product_id,
        quantity, granted_at, credit, original_transaction_id, revoked_at)
    SELECT '', 'Production', (2100000000000000 + i)::text, md5('o' || i)::uuid::text,
        CASE WHEN i % 10 = 0 THEN 'w:' || (2200000000000000 + i) ELSE (2100000000000000 + i)::text END,
        'player-' || (i % 1000000), (ARRAY['coins_100', 'gems_500', 'vip_monthly'])[1 + i % 3], 1,
        now() - (i % 365) * interval '1 day', 'job',
        CASE WHEN i % 10 = 0 THEN (2100000000000000 + i - i % 120)::text END,
        CASE WHEN i % 100 = 7 THEN now() - (i % 365) * interval '1 day' END
    FROM generate_series(:from, :to - 1) AS i;

INSERT INTO receipt_worker.results (app, job_id, fingerprint, event, event_id, event_type, event_time, event_key,
        decided_at)
    SELECT '', md5('j' || i)::uuid::text, md5(i::text) || md5((i + 1)::text), s.event,
        md5('e' || i::text)::uuid::text, 'receipt.granted', '2026-12-01T00:00:00.000Z', md5('o' || i)::uuid::text,
        now() - (i % 29) * interval '1 day'
    FROM generate_series(:from, :to - 1) AS i, sample s WHERE i % 100 < 9;

INSERT INTO receipt_worker.notifications (notification_id, event, event_id, event_type, event_time, event_key,
        handled_at)
    SELECT md5('n' || i::text)::uuid::text, s.event, md5('ne' || i::text)::uuid::text, 'receipt.renewed',
        '2026-12-01T00:00:00.000Z', md5('o' || i)::uuid::text, now() - (i % 200) * interval '1 day'
    FROM generate_series(:from, :to - 1) AS i, sample s WHERE i % 100 < 8;

INSERT INTO receipt_worker.purchase_states (app, environment, purchase_id, transaction_id, revoked, changed_at,
        revoked_share)
    SELECT '', 'Production', (2100000000000000 + i)::text, (2100000000000000 + i)::text, true,
        now() - (i % 365) * interval '1 day', 100000
    FROM generate_series(:from, :to - 1) AS i WHERE i % 100 = 7;

INSERT INTO receipt_worker.subscriptions (app, environment, original_transaction_id, status, expires_at,
        auto_renew, auto_renew_product_id, changed_at)
    SELECT '', 'Production', (2100000000000000 + i)::text, 'active', now() + interval '30 days', true,
        'vip_monthly', now()
    FROM generate_series(:from, :to - 1) AS i WHERE i % 120 = 0;
