#!/usr/bin/env bash
# The upgrade of a big ledger: a PostgreSQL ledger of the previous release (BASELINE_BIN's schema: 1.0.0 or later)
# holding GRANTS grants and the results of 9 in 100 (written with set-based SQL), migrated by
# this build's `ledger migrate` while a client keeps writing grants beside it; prints each migration's duration
# and the longest lock it held, how long the concurrent writer waited at worst, and the ledger's size before
# and after.
#   BASELINE_BIN=PATH scripts/bench-migration.sh [GRANTS]     (default 10000000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
grants="${1:-10000000}"
: "${BASELINE_BIN:?BASELINE_BIN=PATH: the receipt-worker binary of the previous release, whose schema is migrated}"
bash scripts/setup.sh
swift build -c release --product receipt-worker >/dev/null
source scripts/lib/services.sh
work="$(mktemp -d "${BENCH_DIR:-/tmp}/bench-migration.XXXXXX")"
writer_pid=""
cleanup() {
    [ -n "$writer_pid" ] && kill "$writer_pid" 2>/dev/null || true
    services_stop
    rm -rf "$work"
}
trap cleanup EXIT
SERVICES_DIR=""; services_start_postgres 2>/dev/null
url="${POSTGRES_URL%/*}/upgrade"
psql "$POSTGRES_URL" -qc "CREATE DATABASE upgrade"
printf 'apple.bundle_id=com.example\nledger.url=%s\n' "$url" >"$work/ledger.properties"
"$BASELINE_BIN" ledger migrate --config "$work/ledger.properties" | tail -n 1
started="$(date +%s)"
# The previous release's rows, as 1.0.0 writes them: a grant without its event (stored once, in its job's result).
event='{"event_id":"5b1b3f0e-2c4a-8d7e-9f10-1a2b3c4d5e6f","type":"receipt.granted","job_id":"job-000000000001","order_id":"ord-000000000001","user_id":"player-1","decision":"grant","reason":"verified","product_id":"coins_100","quantity":1,"transaction_id":"2100000000000001","original_transaction_id":"2100000000000001","environment":"Production","bundle_id":"com.example","purchase_date":"2026-12-01T00:00:00.000Z","expires_date":null,"verified_at":"2026-12-01T00:00:00.120Z","attempts":1,"detail":null}'
from=0
while [ "$from" -lt "$grants" ]; do
    to=$((from + 1000000)); [ "$to" -gt "$grants" ] && to="$grants"
    psql "$url" -q -v ON_ERROR_STOP=1 -v from="$from" -v to="$to" -v event="$event" <<'SQL' >/dev/null
SET synchronous_commit = off;
INSERT INTO receipt_worker.grants (app, environment, transaction_id, order_id, purchase_id, user_id, product_id,
        quantity, granted_at, credit, original_transaction_id, event)
    SELECT '', 'Production', (2100000000000000 + i)::text, 'ord-' || lpad(i::text, 12, '0'),
        (2100000000000000 + i)::text, 'player-' || (i % 1000000), 'coins_100', 1, now() - (i % 365) * interval '1 day',
        'job', NULL, NULL
    FROM generate_series(:from, :to - 1) AS i;
INSERT INTO receipt_worker.results (app, job_id, fingerprint, event, event_id, event_type, event_time, event_key,
        decided_at)
    SELECT '', 'job-' || lpad(i::text, 12, '0'), md5(i::text), :'event', md5('e' || i::text)::uuid::text,
        'receipt.granted', '2026-12-01T00:00:00.000Z', 'ord-' || lpad(i::text, 12, '0'), now() - (i % 29) * interval '1 day'
    FROM generate_series(:from, :to - 1) AS i WHERE i % 100 < 9;
SQL
    from="$to"
done
psql "$url" -qc "VACUUM ANALYZE" >/dev/null
echo "prefilled $grants grants of the previous release's schema in $(( $(date +%s) - started )) s"
size() { psql "$url" -qtAc "SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid))) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'receipt_worker' AND c.relkind = 'r'"; }
echo "ledger before: $(size)"

# Traffic beside the migration: one grant a transaction, as a worker's claim would write it, timing each.
python3 scripts/lib/migration-writer.py "$url" "$work/writer.txt" &
writer_pid=$!
sleep 2
migrate_started="$(date +%s.%N)"
.build/release/receipt-worker ledger migrate --config "$work/ledger.properties"
migrate_seconds="$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$migrate_started" "$(date +%s.%N)")"
sleep 1
kill "$writer_pid" 2>/dev/null || true; wait "$writer_pid" 2>/dev/null || true; writer_pid=""
read -r written worst <"$work/writer.txt"
worst_ms="$(python3 -c 'import sys; print(round(float(sys.argv[1]) * 1000))' "$worst")"
echo "migrated $grants grants in $migrate_seconds s; a writer beside it wrote $written grants, the slowest in $worst_ms ms"
echo "ledger after: $(size)"
