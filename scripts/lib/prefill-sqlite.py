"""The SQLite ledger's prefill: what scripts/lib/prefill-postgres.sql writes, in SQLite's SQL (a recursive
series instead of generate_series; order and job ids scrambled from the row's number, as random as a UUID's, for
want of md5); with time-ordered, UUIDs of version 7 made at the row's time (one time for the whole prefill, so that
an order's id is the same in every table). python3 prefill-sqlite.py FILE FROM TO [time-ordered]"""
import sqlite3, sys, time

path, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
time_ordered = sys.argv[4:] == ["time-ordered"]
db = sqlite3.connect(path, isolation_level=None)
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA synchronous = OFF")
event = db.execute("SELECT event FROM results WHERE event_type = 'receipt.granted' LIMIT 1").fetchone()[0]
series = "WITH RECURSIVE s(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM s WHERE i < ?2 - 1)"
# i scrambled (Knuth's multiplicative hash), then i itself: random-looking hex, unique.
scrambled = "printf('%08x%08x', (i * 2654435761) % 4294967296, i)"
now = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (i % {days}) || ' days')"
# A UUID of version 7: the milliseconds of the row's time (as `now` above, from one time), then bits scrambled from
# the row's number (unique for each).
base_ms = int(time.time() * 1000)
made_at = ("printf('%08x-%04x-7%03x-%04x-%012x', ({ms}) >> 16, ({ms}) & 65535, (i * 2654435761) % 4096, "
           "32768 + (i * 40503) % 16384, ((i * 2654435761) % 4294967296) * 65536 + i % 65536)")
ms = f"{base_ms} - (i % {{days}}) * 86400000"
order = made_at.format(ms=ms.format(days=365)) if time_ordered else scrambled
job = made_at.format(ms=ms.format(days=29)) if time_ordered else scrambled
db.execute("BEGIN")
db.execute(f"""{series}
    INSERT INTO grants (app, environment, transaction_id, order_id, purchase_id, user_id, product_id, quantity,
        granted_at, credit, original_transaction_id, revoked_at)
    SELECT '', 'Production', CAST(2100000000000000 + i AS TEXT), {order},
        CASE WHEN i % 10 = 0 THEN 'w:' || (2200000000000000 + i) ELSE CAST(2100000000000000 + i AS TEXT) END,
        'player-' || (i % 1000000), CASE i % 3 WHEN 0 THEN 'coins_100' WHEN 1 THEN 'gems_500' ELSE 'vip_monthly' END,
        1, {now.format(days=365)}, 'job',
        CASE WHEN i % 10 = 0 THEN CAST(2100000000000000 + i - i % 120 AS TEXT) END,
        CASE WHEN i % 100 = 7 THEN {now.format(days=365)} END
    FROM s""", (first, last))
db.execute(f"""{series}
    INSERT INTO results (app, job_id, fingerprint, event, event_id, event_type, event_time, event_key, decided_at)
    SELECT '', {job}, printf('%064d', i), ?3, printf('%036d', i), 'receipt.granted',
        '2026-12-01T00:00:00.000Z', {order}, {now.format(days=29)}
    FROM s WHERE i % 100 < 9""", (first, last, event))
db.execute(f"""{series}
    INSERT INTO notifications (notification_id, event, event_id, event_type, event_time, event_key, handled_at)
    SELECT printf('n%035d', i), ?3, printf('e%035d', i), 'receipt.renewed', '2026-12-01T00:00:00.000Z',
        {order}, {now.format(days=200)}
    FROM s WHERE i % 100 < 8""", (first, last, event))
db.execute(f"""{series}
    INSERT INTO purchase_states (app, environment, purchase_id, transaction_id, revoked, changed_at, revoked_share)
    SELECT '', 'Production', CAST(2100000000000000 + i AS TEXT), CAST(2100000000000000 + i AS TEXT), 1,
        {now.format(days=365)}, 100000
    FROM s WHERE i % 100 = 7""", (first, last))
db.execute(f"""{series}
    INSERT INTO subscriptions (app, environment, original_transaction_id, status, expires_at, auto_renew,
        auto_renew_product_id, changed_at)
    SELECT '', 'Production', CAST(2100000000000000 + i AS TEXT), 'active', '2027-01-01T00:00:00.000Z', 1,
        'vip_monthly', '2026-12-01T00:00:00.000Z'
    FROM s WHERE i % 120 = 0""", (first, last))
db.execute("COMMIT")
db.execute("ANALYZE")
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
