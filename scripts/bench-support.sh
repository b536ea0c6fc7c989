#!/usr/bin/env bash
# What `receipt-worker lookup` and `credit` cost the ledger when it is big: a PostgreSQL ledger migrated
# by `receipt-worker ledger migrate`, filled with GRANTS grants (a tenth of them a subscription's period, renewals
# beside them) and REPORTS purchases Apple reported (waiting or credited unclaimed), then each of support's reads
# (Sources/Ledger/Engine/LedgerQueries.swift, the same SQL) under EXPLAIN ANALYZE: its plan's access path and
# its time, the median of 5 runs. A read that scans a table says so.
#   scripts/bench-support.sh [GRANTS] [REPORTS]     (default 1000000 and 100000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
grants="${1:-1000000}"
reports="${2:-100000}"
bash scripts/setup.sh >/dev/null
swift build -c release --product receipt-worker >/dev/null
source scripts/lib/services.sh
work="$(mktemp -d "${BENCH_DIR:-/tmp}/bench-support.XXXXXX")"
cleanup() { services_stop; rm -rf "$work"; }
trap cleanup EXIT
SERVICES_DIR=""; services_start_postgres 2>/dev/null
psql "$POSTGRES_URL" -qtAc "CREATE DATABASE support" >/dev/null
ledger="${POSTGRES_URL%/*}/support"
printf 'apple.bundle_id=com.example\nledger.url=%s\n' "$ledger" >"$work/migrate.properties"
.build/release/receipt-worker ledger migrate --config "$work/migrate.properties" >/dev/null
started="$(date +%s)"
psql "$ledger" -q -v grants="$grants" -v reports="$reports" <<'SQL'
\set ON_ERROR_STOP on
SET synchronous_commit = off;
INSERT INTO receipt_worker.grants (app, environment, transaction_id, order_id, purchase_id, user_id, product_id,
        quantity, granted_at, credit, original_transaction_id)
    SELECT '', 'Production', (2100000000000000 + i)::text, 'ord-' || lpad(i::text, 12, '0'),
        CASE WHEN i % 10 = 0 THEN 'w:' || (2200000000000000 + i) ELSE (2100000000000000 + i)::text END,
        'player-' || (i % 1000000), 'gems_500', 1, now() - (i % 365) * interval '1 day',
        CASE WHEN i % 10 = 5 THEN 'renewal' ELSE 'job' END,
        CASE WHEN i % 10 IN (0, 5) THEN (2100000000000000 + i - i % 10)::text END
    FROM generate_series(1, :grants) AS i;
INSERT INTO receipt_worker.unclaimed_purchases (app, environment, purchase_id, transaction_id, original_transaction_id,
        product_id, quantity, due_at, state, published, event_id, event_type, event_time, event_key, event)
    SELECT '', 'Production', (2300000000000000 + i)::text, (2300000000000000 + i)::text, (2300000000000000 + i)::text,
        'gems_500', 1, now() + interval '1 hour', CASE WHEN i % 2 = 0 THEN 'waiting' ELSE 'credited' END, i % 2 = 1,
        md5('u' || i::text)::uuid::text, 'receipt.unclaimed', '2026-12-01T00:00:00.000Z', 'unclaimed:' || i,
        '{"type":"receipt.unclaimed","app_account_token":"' || md5('t' || i::text)::uuid::text
            || '","product_id":"gems_500","price":990,"currency":"USD"}'
    FROM generate_series(1, :reports) AS i;
VACUUM ANALYZE;
SQL
echo "ledger: $grants grants, $reports reports, filled in $(( $(date +%s) - started )) s"
# explain NAME SQL: the access paths of the plan and the median execution time of 5 runs.
explain() {
    local name="$1" sql="$2" times=() plan
    for _ in 1 2 3 4 5; do
        plan="$(psql "$ledger" -qtAc "EXPLAIN (ANALYZE, COSTS OFF) $sql")"
        times+=("$(grep -o 'Execution Time: [0-9.]*' <<<"$plan" | grep -o '[0-9.]*$')")
    done
    local median; median="$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)"
    local paths; paths="$(grep -oE '(Index Only Scan|Index Scan|Bitmap Index Scan|Seq Scan)( using [a-z_]+)? on [a-z_]+' <<<"$plan" | sort | uniq -c | sed 's/^ *//' | paste -sd ';' -)"
    printf '%-44s %9s ms   %s\n' "$name" "$median" "$paths"
}
printf '%-44s %12s   %s\n' "read" "median" "access paths"
tx=$((2100000000000000 + grants / 2 + 3)); order="ord-$(printf '%012d' $((grants / 2 + 5)))"
token="$(psql "$ledger" -qtAc "SELECT md5('t' || $((reports / 2 + 1))::text)::uuid::text")"
explain "supportRecord: the purchase's grant" "SELECT order_id, coalesce(user_id, ''), transaction_id, extract(epoch FROM granted_at)::text, extract(epoch FROM revoked_at)::text, credit, 0 FROM receipt_worker.grants WHERE app = '' AND environment = 'Production' AND purchase_id = '$tx' UNION ALL SELECT order_id, coalesce(user_id, ''), transaction_id, extract(epoch FROM granted_at)::text, extract(epoch FROM revoked_at)::text, credit, 1 FROM receipt_worker.grants WHERE app = '' AND environment = 'Production' AND transaction_id = '$tx' ORDER BY 7 LIMIT 1"
explain "supportRecord: its unclaimed report" "SELECT state, extract(epoch FROM due_at)::text, event_id, published::text, extract(epoch FROM settled_at)::text FROM receipt_worker.unclaimed_purchases WHERE app = '' AND environment = 'Production' AND purchase_id = '2300000000000042'"
explain "grantedTransactions: an order's grants" "SELECT environment, transaction_id, granted_at FROM receipt_worker.grants WHERE app = '' AND order_id = '$order' AND credit = 'job' UNION ALL SELECT environment, transaction_id, granted_at FROM receipt_worker.grants WHERE app = '' AND order_id = '$order' AND credit = 'renewal' ORDER BY 3 LIMIT 100"
explain "reportedTransactions: a token's reports (scan)" "SELECT environment, transaction_id FROM receipt_worker.unclaimed_purchases WHERE app = '' AND state IN ('waiting', 'credited') AND receipt_worker.event_json(event)->>'app_account_token' = '$token' ORDER BY reported_at LIMIT 100"
