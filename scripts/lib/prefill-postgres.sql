-- Grants from :from to :to (exclusive) of a big game's year, written with set-based SQL, and what the ledger holds
-- beside them at its retention's steady state: results of the last 30 days (a year's grants at a steady rate,
-- plus one deny in ten), notifications of the last 200 days (0.15 a grant a year: renewals, refunds, requests),
-- a refund's purchase state for 1 % of grants, a subscription's state for 1 %. Events are copies of a real
-- stored event, so their bytes are the worker's. Order and job ids are random UUIDs, as a game's backend makes them
-- (an index on them is written at random places, as in production), players one of a million.
-- With -v time_ordered=true, order and job ids are UUIDs of version 7 (RFC 9562: the time they were made first, so
-- their text sorts by it), made at the grant's or the result's time.
-- psql -v from=N -v to=M [-v time_ordered=true] -f scripts/lib/prefill-postgres.sql
\set ON_ERROR_STOP on
\if :{?time_ordered}
\else
\set time_ordered false
\endif
SET synchronous_commit = off;
-- One time for the whole prefill, so that an order's id is the same in every table it is written to.
SELECT now() AS base \gset
-- An id made at time t from seed: random as a UUID of version 4, or (ordered) one of version 7 of t's milliseconds.
-- One expression (no FROM, STABLE as what it calls), so PostgreSQL inlines it rather than calling it per row.
CREATE FUNCTION pg_temp.id(t timestamptz, seed text, ordered boolean) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT (CASE WHEN NOT ordered THEN md5(seed) ELSE
        lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') || '7' || substr(md5(seed), 14, 3)
            || substr('89ab', 1 + ('x' || substr(md5(seed), 17, 1))::bit(4)::int % 4, 1) || substr(md5(seed), 18, 15)
        END)::uuid::text
$$;
CREATE TEMP TABLE sample AS SELECT event FROM receipt_worker.results WHERE event_type = 'receipt.granted' LIMIT 1;

INSERT INTO receipt_worker.grants (app, environment, transaction_id, order_id, purchase_id, user_id, product_id,
        quantity, granted_at, credit, original_transaction_id, revoked_at)
    SELECT '', 'Production', (2100000000000000 + i)::text,
        pg_temp.id(:'base'::timestamptz - (i % 365) * interval '1 day', 'o' || i, :time_ordered),
        CASE WHEN i % 10 = 0 THEN 'w:' || (2200000000000000 + i) ELSE (2100000000000000 + i)::text END,
        'player-' || (i % 1000000), (ARRAY['coins_100', 'gems_500', 'vip_monthly'])[1 + i % 3], 1,
        now() - (i % 365) * interval '1 day', 'job',
        CASE WHEN i % 10 = 0 THEN (2100000000000000 + i - i % 120)::text END,
        CASE WHEN i % 100 = 7 THEN now() - (i % 365) * interval '1 day' END
    FROM generate_series(:from, :to - 1) AS i;

INSERT INTO receipt_worker.results (app, job_id, fingerprint, event, event_id, event_type, event_time, event_key,
        decided_at)
    SELECT '', pg_temp.id(:'base'::timestamptz - (i % 29) * interval '1 day', 'j' || i, :time_ordered),
        md5(i::text) || md5((i + 1)::text), s.event, md5('e' || i::text)::uuid::text, 'receipt.granted',
        '2026-12-01T00:00:00.000Z',
        pg_temp.id(:'base'::timestamptz - (i % 365) * interval '1 day', 'o' || i, :time_ordered),
        now() - (i % 29) * interval '1 day'
    FROM generate_series(:from, :to - 1) AS i, sample s WHERE i % 100 < 9;

INSERT INTO receipt_worker.notifications (notification_id, event, event_id, event_type, event_time, event_key,
        handled_at)
    SELECT md5('n' || i::text)::uuid::text, s.event, md5('ne' || i::text)::uuid::text, 'receipt.renewed',
        '2026-12-01T00:00:00.000Z',
        pg_temp.id(:'base'::timestamptz - (i % 365) * interval '1 day', 'o' || i, :time_ordered),
        now() - (i % 200) * interval '1 day'
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
