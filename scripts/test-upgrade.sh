#!/usr/bin/env bash
# The upgrade drill: the previous release's worker and this one on one PostgreSQL ledger, through the
# migration, while jobs flow. The previous release (PREVIOUS_RELEASE, a commit of this repository) is built in a
# worktree of its own; both are debug builds. Then, with every purchase presented for two orders:
#   1. the previous release migrates the ledger to its schema and decides alone;
#   2. this build's `ledger migrate` runs while it decides and jobs keep coming;
#   3. this build's worker joins the same consumer group beside it;
#   4. once it is ready (`/readyz`: partitions assigned), as a rolling update waits for, the previous release
#      stops (SIGTERM, its graceful drain); this build decides alone.
# Passes when every job is answered, each with one event, and each purchase is granted to exactly one order; and
# when a new ledger of this build (made as 1.0.0 left one, at once) has the same schema as the previous release's
# ledger migrated by this build, on PostgreSQL and SQLite, and the previous release finds nothing to migrate on it.
#   scripts/test-upgrade.sh [PAIRS_PER_PHASE]      (default 150)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
per_phase="${1:-150}"
previous="${PREVIOUS_RELEASE:-13344b1}"  # the previous release, 1.0.0 (its last commit before migration 12): migration 11
bash scripts/setup.sh >/dev/null
swift build --product receipt-worker >/dev/null
swift build --product appstore-sim >/dev/null
root="$PWD"
work="$(mktemp -d "${TMPDIR:-/tmp}/upgrade-drill.XXXXXX")"
prev_dir="$root/.build/previous-release"
if [ ! -x "$prev_dir/.build/debug/receipt-worker" ] || [ "$(cat "$prev_dir/.commit" 2>/dev/null)" != "$previous" ]; then
    echo "[upgrade] building the previous release ($previous)"
    git worktree remove --force "$prev_dir" 2>/dev/null || rm -rf "$prev_dir"
    git worktree prune
    git worktree add --detach "$prev_dir" "$previous" >/dev/null 2>&1
    ln -sfn "$root/.deps" "$prev_dir/.deps"
    (cd "$prev_dir" && swift build --product receipt-worker >/dev/null)
    echo "$previous" >"$prev_dir/.commit"
fi
old_bin="$prev_dir/.build/debug/receipt-worker"
new_bin="$root/.build/debug/receipt-worker"
source scripts/lib/services.sh
old_pid=""; new_pid=""; sim_pid=""
cleanup() {
    local status=$?
    for pid in $old_pid $new_pid $sim_pid; do kill -9 "$pid" 2>/dev/null || true; done
    services_stop
    if [ "$status" -eq 0 ]; then rm -rf "$work"; else echo "[upgrade] kept $work (the workers' logs)" >&2; fi
}
trap cleanup EXIT
SERVICES_DIR=""; services_start_kafka 2>/dev/null; services_start_postgres 2>/dev/null
"$root/.build/debug/appstore-sim" --port 0 >"$work/sim.out" &
sim_pid=$!
for _ in $(seq 200); do grep -q listening "$work/sim.out" && break; sleep 0.05; done
SIM_URL="$(sed -n 's/^listening on //p' "$work/sim.out")"
"$root/.build/debug/appstore-sim" --print-test-root >"$work/root.pem"
for topic in jobs results dlq; do
    .deps/tools/tansu topic create "upgrade-$topic" --partitions 4 --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null
done
psql "$POSTGRES_URL" -qc "CREATE DATABASE upgrade"
cat >"$work/worker.properties" <<PROPS
apple.bundle_id=com.example
$(services_simulator_properties "$work")
ledger.url=${POSTGRES_URL%/*}/upgrade
ledger.pool_size=4
topics.jobs=upgrade-jobs
topics.results=upgrade-results
topics.dlq=upgrade-dlq
kafka.bootstrap.servers=$KAFKA_BOOTSTRAP
kafka.group.id=upgrade-workers
kafka.session.timeout.ms=6000
kafka.heartbeat.interval.ms=500
PROPS

# enqueue_pairs PHASE: PAIRS_PER_PHASE purchases, each presented for two orders, through `receipt-worker enqueue`.
enqueue_pairs() {
    python3 - "$SIM_URL" "$1" "$per_phase" <<'PY' >"$work/jobs-$1.jsonl"
import json, sys, urllib.request
sim, phase, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(count):
    request = urllib.request.Request(f"{sim}/admin/purchases", data=json.dumps({"product_id": "coins"}).encode(),
                                     headers={"Content-Type": "application/json"})
    receipt = json.load(urllib.request.urlopen(request))["receipt"]
    for side in "ab":
        print(json.dumps({"job_id": f"{phase}-{i}-{side}", "order_id": f"order-{phase}-{i}-{side}",
                          "user_id": "player", "product_id": "coins", "receipt": receipt}))
PY
    "$new_bin" enqueue --config "$work/worker.properties" --file "$work/jobs-$1.jsonl" >/dev/null
}

echo "[upgrade] 1. the previous release ($previous) migrates and decides alone"
"$old_bin" ledger migrate --config "$work/worker.properties" | tail -n 1
LOG_LEVEL=warning "$old_bin" run --config "$work/worker.properties" 2>"$work/old.log" &
old_pid=$!
enqueue_pairs one
echo "[upgrade] 2. this build migrates the ledger while the previous release decides"
enqueue_pairs two &
producer=$!
"$new_bin" ledger migrate --config "$work/worker.properties" | sed 's/^/  /'
wait "$producer"
echo "[upgrade] 3. this build's worker joins the group beside the previous release"
new_metrics="$(free_port)"
LOG_LEVEL=warning "$new_bin" run --config "$work/worker.properties" --set "metrics.listen=127.0.0.1:$new_metrics" \
    2>"$work/new.log" &
new_pid=$!
enqueue_pairs three
# As the Deployment's rolling update does (it stops the next replica of the previous release once the new one is
# ready), the previous release stops once this build's `/readyz` says its partitions are assigned. Stopping it while
# the group still rebalances for the new member is a case the test broker (Tansu 0.6.0) never settles: it goes on
# naming the member that left as the group's leader, and the new member waits for an assignment for good.
ready() { curl -sf --max-time 2 "http://127.0.0.1:$new_metrics/readyz" >/dev/null; }
ready_or_exited() { ready || ! kill -0 "$new_pid" 2>/dev/null; }
wait_for "this build's worker (/readyz)" 60 ready_or_exited || true
ready || {
    echo "[upgrade] this build's worker is not ready or exited:" \
        "$(curl -s --max-time 2 "http://127.0.0.1:$new_metrics/readyz"); its log: $work/new.log" >&2
    exit 1
}
echo "[upgrade] 4. the previous release stops; this build decides alone"
kill -TERM "$old_pid"; wait "$old_pid" || true; old_pid=""
enqueue_pairs four
total=$((per_phase * 4 * 2))
# Every job's answer (at least $total events), then everything the topic holds a few seconds later: a job answered
# twice would show there.
"$new_bin" results --config "$work/worker.properties" --from-beginning --count "$total" --timeout 180 >/dev/null || true
sleep 5
"$new_bin" results --config "$work/worker.properties" --from-beginning --json --count $((total * 2)) --timeout 15 \
    >"$work/results.jsonl" || true
kill -TERM "$new_pid"; wait "$new_pid" || true; new_pid=""
python3 - "$work/results.jsonl" "$per_phase" <<'PY'
import collections, json, sys
path, per_phase = sys.argv[1], int(sys.argv[2])
events = collections.defaultdict(set)
grants = collections.defaultdict(int)
decided = {}
for line in open(path):
    event = json.loads(line)
    events[event["job_id"]].add(event["event_id"])
    decided[event["job_id"]] = event
phases = ["one", "two", "three", "four"]
expected = [f"{p}-{i}-{s}" for p in phases for i in range(per_phase) for s in "ab"]
unanswered = [j for j in expected if j not in events]
two_answers = [j for j in expected if len(events.get(j, ())) > 1]
twice, never = [], []
for p in phases:
    for i in range(per_phase):
        granted = [s for s in "ab" if decided.get(f"{p}-{i}-{s}", {}).get("decision") == "grant"]
        (twice if len(granted) > 1 else never if not granted else []).append(f"{p}-{i}")
print(f"[upgrade] {len(expected)} jobs: {len(expected) - len(unanswered)} answered, {len(two_answers)} with two"
      f" different events, {len(twice)} purchases granted twice, {len(never)} never granted")
sys.exit(1 if unanswered or two_answers or twice or never else 0)
PY

# pg_schema DATABASE, sqlite_schema FILE: a ledger's schema, comparable between two ledgers.
pg_schema() { pg_dump --schema-only --no-owner "${POSTGRES_URL%/*}/$1" | grep -v '^\\\(un\)\?restrict\|^--'; }
sqlite_schema() {
    python3 - "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for kind, name, sql in db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name"):
    print(kind, name, " ".join((sql or "").split()))
print("version", db.execute("PRAGMA user_version").fetchone()[0])
PY
}
ledger_at() { printf 'apple.bundle_id=com.example\nledger.url=%s\n' "$1" >"$work/at.properties"; echo "$work/at.properties"; }
echo "[upgrade] 5. a new ledger of this build has the schema of the previous release's, migrated"
psql "$POSTGRES_URL" -qc "CREATE DATABASE fresh"
"$new_bin" ledger migrate --config "$(ledger_at "${POSTGRES_URL%/*}/fresh")" >/dev/null
pg_schema upgrade >"$work/upgraded.sql"
pg_schema fresh >"$work/fresh.sql"
"$old_bin" ledger migrate --config "$(ledger_at "${POSTGRES_URL%/*}/fresh")" >/dev/null
pg_schema fresh >"$work/fresh-after-previous.sql"
: >"$work/old.sqlite"; : >"$work/new.sqlite"
"$old_bin" ledger prune --older-than-days 1 --config "$(ledger_at "sqlite:$work/old.sqlite")" >/dev/null
"$new_bin" ledger prune --older-than-days 1 --config "$(ledger_at "sqlite:$work/old.sqlite")" >/dev/null
"$new_bin" ledger prune --older-than-days 1 --config "$(ledger_at "sqlite:$work/new.sqlite")" >/dev/null
"$old_bin" ledger prune --older-than-days 1 --config "$(ledger_at "sqlite:$work/new.sqlite")" >/dev/null
sqlite_schema "$work/old.sqlite" >"$work/upgraded.sqlite.txt"
sqlite_schema "$work/new.sqlite" >"$work/fresh.sqlite.txt"
diff -u "$work/upgraded.sql" "$work/fresh.sql"
diff -u "$work/fresh.sql" "$work/fresh-after-previous.sql"
diff -u "$work/upgraded.sqlite.txt" "$work/fresh.sqlite.txt"
echo "[upgrade] the same schema: PostgreSQL ($(grep -c '^CREATE' "$work/fresh.sql") statements), SQLite" \
    "($(wc -l <"$work/fresh.sqlite.txt") objects); the previous release migrated nothing on the new ledger"
echo "[upgrade] passed"
