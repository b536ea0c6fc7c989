#!/usr/bin/env bash
# The local demo: installs what is missing, builds, starts a Kafka broker (Tansu), the App Store simulator
# and the worker on the SQLite ledger, submits five sample purchases, and prints the results as they
# arrive; then the simulator, as Apple, refunds the first purchase (receipt.revoked) and opens a refund
# request on another, which the demo answers as a grant service would; renews a VIP subscription
# (receipt.renewed); and reports a purchase the app never told its backend about, credited by
# receipt.unclaimed five seconds later (notifications.unclaimed_after_ms, 1 hour outside the demo); and support
# looks up a purchase nothing reached the backend of, by its invoice's order id, and credits it. Then the support
# desk (receipt-worker desk, docs/support-desk.md) starts behind a test OpenID Connect provider
# (Tests/desk/oidc_provider.py): its console to sign in to, and one call of its API with a minted token, which looks
# up what the demo's player bought. Ctrl-C stops everything cleanly (the worker drains and exits 0).
#   scripts/demo.sh           runs until Ctrl-C
#   scripts/demo.sh --once    stops by itself once the eleven results are in (for scripts and CI)
#   scripts/demo.sh --serve   no sample purchases and no desk: broker, simulator and worker for your own
#                             services' tests, their addresses in .demo/env once ready, until Ctrl-C or SIGTERM
#                             (docs/integration.md, "Testing your integration")
# and with either:
#   --set KEY=VALUE           a setting of the worker, after the demo's own (notifications.unclaimed_after_ms, ...)
#   --kafka HOST:PORT         a Kafka of yours instead of the Tansu broker; its topics must exist (README, "The demo")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
once=false; serve=false; kafka=""; settings=()
while (($#)); do
    case "$1" in
    --once) once=true ;;
    --serve) serve=true ;;
    --set) [ $# -ge 2 ] || { echo "--set needs KEY=VALUE" >&2; exit 2; }; settings+=(--set "$2"); shift ;;
    --kafka) [ $# -ge 2 ] || { echo "--kafka needs HOST:PORT" >&2; exit 2; }; kafka="$2"; shift ;;
    *) echo "usage: scripts/demo.sh [--once | --serve] [--set KEY=VALUE]... [--kafka HOST:PORT]" >&2; exit 2 ;;
    esac
    shift
done

say() { printf '\033[1m%s\033[0m\n' "$*" >&2; }

bash scripts/setup.sh
say "building (release) ..."
swift build -c release --product receipt-worker >/dev/null
swift build -c release --product appstore-sim >/dev/null
bin=.build/release

# Demo state is thrown away on every run: the simulator numbers its transactions from the start again.
rm -rf .demo && mkdir -p .demo
source scripts/lib/services.sh
pids=()
cleanup() {
    trap - INT TERM EXIT
    [ -n "${results_pid:-}" ] && kill "$results_pid" 2>/dev/null || true
    # The desk first (SIGTERM: stop answering, flush its producer), then its sign-in provider.
    for name in desk provider; do
        local pid_var="${name}_pid"
        local pid="${!pid_var:-}"
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid"
            status=0; wait "$pid" || status=$?
            say "$([ "$name" = desk ] && echo "support desk" || echo "sign-in provider") exited with status $status"
        fi
    done
    if [ -n "${worker_pid:-}" ] && kill -0 "$worker_pid" 2>/dev/null; then
        say "stopping the worker (SIGTERM: drain, commit, flush) ..."
        kill -TERM "$worker_pid"
        status=0; wait "$worker_pid" || status=$?
        say "worker exited with status $status"
    fi
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    services_stop
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$kafka" ]; then
    KAFKA_BOOTSTRAP="$kafka"
    say "Kafka: $KAFKA_BOOTSTRAP (yours: the topics must exist)"
else
    services_start_kafka
    for topic in receipt-jobs:4 receipt-results:1 receipt-dlq:1 receipt-notifications:2 receipt-consumption:1 receipt-retries:2; do
        "$TANSU_BIN" topic create "${topic%%:*}" --partitions "${topic##*:}" --broker "tcp://$KAFKA_BOOTSTRAP" >/dev/null 2>&1
    done
fi

sim_port="$(free_port)"
sim="http://127.0.0.1:$sim_port"
notifications_port="$(free_port)"
# The simulator sends App Store Server Notifications V2 to the worker's receiver, as Apple would.
own_process_group "$bin/appstore-sim" --port "$sim_port" --bundle-id com.example \
    --notification-url "http://127.0.0.1:$notifications_port/notifications/apple" >.demo/simulator.log 2>&1 &
pids+=($!)
"$bin/appstore-sim" --print-test-root >.demo/simulator-root.pem
wait_for "App Store simulator" 20 port_open "$sim_port"
say "App Store simulator on $sim (logs: .demo/simulator.log)"

metrics_port="$(free_port)"
# Ctrl-C reaches the script only; it stops the worker first (SIGTERM), then the rest.
own_process_group "$bin/receipt-worker" run --config config/local.properties \
    --set "kafka.bootstrap.servers=$KAFKA_BOOTSTRAP" \
    --set "apple.verify_receipt.production_url=$sim/production/verifyReceipt" \
    --set "apple.verify_receipt.sandbox_url=$sim/sandbox/verifyReceipt" \
    --set "apple.allow_insecure_urls=true" \
    --set "apple.api.production_url=$sim/production" --set "apple.api.sandbox_url=$sim/sandbox" \
    --set "notifications.listen=127.0.0.1:$notifications_port" \
    --set "notifications.unclaimed_after_ms=$($serve && echo 3600000 || echo 5000)" \
    --set "metrics.listen=127.0.0.1:$metrics_port" "${settings[@]}" >.demo/worker.log 2>&1 &
worker_pid=$!
wait_for "the worker's metrics endpoint" 30 port_open "$metrics_port"
ready() { curl -sf "http://127.0.0.1:$metrics_port/readyz"; }
wait_for "the worker to join its group (/readyz)" 60 ready
say "worker running (logs: .demo/worker.log); metrics: curl -s http://127.0.0.1:$metrics_port/metrics | grep receipt_worker_"
# For scripts (a team's CI): every address, once the worker is ready; written last, so its presence means ready.
cat >.demo/env.partial <<ENV
export KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP RECEIPT_WORKER_KAFKA__BOOTSTRAP__SERVERS=$KAFKA_BOOTSTRAP
export SIMULATOR=$sim NOTIFICATIONS_URL=http://127.0.0.1:$notifications_port/notifications/apple
export METRICS_URL=http://127.0.0.1:$metrics_port/metrics PATH="$PWD/$bin:\$PATH"
ENV
mv .demo/env.partial .demo/env
if $serve; then
    trap 'exit 0' TERM  # the way a CI job stops it: a clean stop, not a failure
    say "serving: topics receipt-jobs, receipt-results, receipt-dlq, receipt-notifications, receipt-consumption;"
    say "addresses in .demo/env (source it). Ctrl-C or SIGTERM stops everything."
    status=0; wait "$worker_pid" || status=$?
    worker_pid=""
    exit "$status"
fi
say ""
say "to try the README's commands in a second terminal, paste:"
say "  export PATH=\"$PWD/$bin:\$PATH\" RECEIPT_WORKER_KAFKA__BOOTSTRAP__SERVERS=$KAFKA_BOOTSTRAP SIMULATOR=$sim"
say "  receipt-worker results --from-beginning --count 5 --timeout 30"
say "  curl -s -X POST \$SIMULATOR/admin/purchases -d '{\"product_id\":\"coins_100\"}'"

# purchase JSON: asks the simulator to make a purchase, as the App Store would after a player pays.
purchase() { curl -sf -X POST "$sim/admin/purchases" -d "$1"; }
field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
enqueue() { "$bin/receipt-worker" enqueue --set "kafka.bootstrap.servers=$KAFKA_BOOTSTRAP" --user-id player-42 "$@" >/dev/null; }

coins="$(purchase '{"product_id":"coins_100"}')"
cheap="$(purchase '{"product_id":"coins_100"}')"
sandbox="$(purchase '{"product_id":"coins_100","environment":"Sandbox"}')"
during_outage="$(purchase '{"product_id":"gems_500"}')"

say ""
say "sample purchases (order: what happens)"
say "  demo-grant:    a genuine purchase of coins_100                        -> grant"
say "  demo-replay:   the same receipt again, for a second order             -> deny duplicate_transaction"
say "  demo-swap:     a coins_100 receipt presented for a gems_5000 order    -> deny product_mismatch"
say "  demo-sandbox:  a sandbox (tester) receipt, production policy          -> deny sandbox_not_allowed"
say "  demo-outage:   verified while Apple answers 503 for 6 s               -> grant after retries (ATTEMPTS > 1)"
say "then, as Apple: demo-grant's purchase refunded                          -> revoked (REFUND_FULL)"
say "               a refund request on demo-outage's purchase                -> consumption_requested, answered"
say "  demo-vip:      a VIP subscription                                     -> grant"
say "then, as Apple: demo-vip renews for a month                             -> renewed (active, to next month)"
say "               a gem pack bought while the app crashed (no job)          -> unclaimed after 5 s, by app_account_token"
say ""

"$bin/receipt-worker" results --set "kafka.bootstrap.servers=$KAFKA_BOOTSTRAP" --from-beginning \
    $($once && echo "--count 11 --timeout 120") &
results_pid=$!

enqueue --order-id demo-grant --product-id coins_100 --receipt "$(field receipt <<<"$coins")"
sleep 1  # so the replay comes second: the first order keeps the grant
enqueue --order-id demo-replay --product-id coins_100 --receipt "$(field receipt <<<"$coins")"
# The app reports the transaction it bought with the receipt; the worker checks that transaction's product.
enqueue --order-id demo-swap --product-id gems_5000 --receipt "$(field receipt <<<"$cheap")" \
    --transaction-id "$(field transaction_id <<<"$cheap")"
enqueue --order-id demo-sandbox --product-id coins_100 --receipt "$(field receipt <<<"$sandbox")"
decided() { [ "$(curl -s "http://127.0.0.1:$metrics_port/metrics" | grep -c '^receipt_worker_decisions_total{.*} [1-9]')" -ge 3 ]; }
wait_for "the first four results" 60 decided
curl -sf -X PUT "$sim/admin/faults" -d '{"outage_start_in_ms":0,"outage_seconds":6,"outage_mode":"http_5xx"}' >/dev/null
enqueue --order-id demo-outage --product-id gems_500 --receipt "$(field receipt <<<"$during_outage")"

# After the grant: Apple refunds a purchase, and a player asks for a refund of another.
granted() { [ "$(curl -s "http://127.0.0.1:$metrics_port/metrics" | grep -c '^receipt_worker_decisions_total{.*decision="grant".*} [2-9]')" -ge 1 ]; }
wait_for "both grants" 60 granted
curl -sf -X POST "$sim/admin/refund" -d "{\"transaction_id\":\"$(field transaction_id <<<"$coins")\"}" >/dev/null
outage_transaction="$(field transaction_id <<<"$during_outage")"
curl -sf -X POST "$sim/admin/consumption-request" \
    -d "{\"transaction_id\":\"$outage_transaction\",\"reason\":\"UNINTENDED_PURCHASE\"}" >/dev/null
# The grant service knows the player spent 80 % of the gems: it answers (with the player's consent).
requested() { curl -s "http://127.0.0.1:$metrics_port/metrics" | grep -q '^receipt_worker_notifications_processed_total{outcome="published",type="CONSUMPTION_REQUEST"} 1'; }
wait_for "the refund request" 60 requested
"$bin/receipt-worker" consumption answer --set "kafka.bootstrap.servers=$KAFKA_BOOTSTRAP" \
    --transaction-id "$outage_transaction" --consented --sample-content-provided false \
    --consumption-percentage 80 --refund-preference DECLINE >/dev/null
answered() { [ "$(curl -s "$sim/admin/consumption")" != "[]" ]; }
wait_for "the answer to reach Apple" 60 answered
say "Apple (the simulator) received the consumption answer: $(curl -s "$sim/admin/consumption" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)[0]["body"]))')"

# A subscription's life: granted by a job, then renewed by Apple (a new transaction of the subscription).
vip="$(purchase '{"product_id":"vip_monthly","type":"subscription"}')"
enqueue --order-id demo-vip --product-id vip_monthly --signed-transaction "$(field signed_transaction <<<"$vip")"
vip_granted() { [ "$(curl -s "http://127.0.0.1:$metrics_port/metrics" | grep -c '^receipt_worker_decisions_total{.*decision="grant".*} [3-9]')" -ge 1 ]; }
wait_for "the subscription's grant" 60 vip_granted
curl -sf -X POST "$sim/admin/renew" -d "{\"transaction_id\":\"$(field transaction_id <<<"$vip")\"}" >/dev/null
# The player pays for gems and the app crashes before its backend sends the job: Apple reports the purchase
# (ONE_TIME_CHARGE) with the appAccountToken the game set, and no job ever claims it.
purchase '{"product_id":"gems_500","app_account_token":"6f1c2b7e-4a0d-4c9e-8b3a-2d5e7f9a1c04","notify":true}' >/dev/null
# Support: a player writes in with the order id of Apple's invoice for gems bought while the app crashed (no job,
# no token, no notification kept). Support looks it up, then credits it to the player's order (README, "Support:
# a player says they paid").
crashed="$(purchase '{"product_id":"gems_100","price":1990,"currency":"EUR","storefront":"FRA"}')"
tool() {
    "$bin/receipt-worker" "$@" --config config/local.properties --set "kafka.bootstrap.servers=$KAFKA_BOOTSTRAP" \
        --set "apple.allow_insecure_urls=true" --set "apple.api.production_url=$sim/production" \
        --set "apple.api.sandbox_url=$sim/sandbox"
}
say ""
say "support: receipt-worker lookup --by demo-agent --apple-order-id $(field order_id <<<"$crashed")"
tool lookup --by demo-agent --apple-order-id "$(field order_id <<<"$crashed")" | sed 's/^/  /' >&2
say "support: receipt-worker credit --transaction-id $(field transaction_id <<<"$crashed") --order-id demo-support ..."
tool credit --transaction-id "$(field transaction_id <<<"$crashed")" --apple-order-id "$(field order_id <<<"$crashed")" \
    --order-id demo-support --user-id player-42 \
    --by demo-agent --reason "paid, the app crashed" --app-account-token 0b7e2d4c-1a3f-4e5b-9c8d-7f6a5b4c3d2e |
    sed 's/^/  /' >&2

# The support desk: agents look up and credit in a web console behind the studio's sign-in, and every act is
# audited; here the test OpenID Connect provider stands in for the studio's (HTTPS on loopback, a throwaway CA).
desk_port="$(free_port)"
desk_metrics_port="$(free_port)"
desk_url="http://127.0.0.1:$desk_port"
mkdir -p .demo/oidc
own_process_group .deps/venv/bin/python Tests/desk/oidc_provider.py .demo/oidc/port .demo/oidc \
    --redirect-uri "$desk_url/desk/callback" >.demo/oidc.log 2>&1 &
provider_pid=$!
wait_for "the test sign-in provider" 30 test -s .demo/oidc/port || { cat .demo/oidc.log >&2; exit 1; }
provider="https://127.0.0.1:$(cat .demo/oidc/port)"
(umask 077 && openssl rand -hex 32 >.demo/desk-session-key)
own_process_group "$bin/receipt-worker" desk --config config/local.properties \
    --set "kafka.bootstrap.servers=$KAFKA_BOOTSTRAP" \
    --set "apple.allow_insecure_urls=true" --set "apple.api.production_url=$sim/production" \
    --set "apple.api.sandbox_url=$sim/sandbox" \
    --set "metrics.listen=127.0.0.1:$desk_metrics_port" \
    --set "desk.listen=127.0.0.1:$desk_port" --set "desk.public_url=$desk_url" \
    --set "desk.oidc.issuer=$provider" --set "desk.oidc.client_id=support-desk" \
    --set "desk.oidc.client_secret_file=.demo/oidc/client_secret" --set "desk.oidc.ca_file=.demo/oidc/ca.pem" \
    --set "desk.session_key_file=.demo/desk-session-key" >.demo/desk.log 2>&1 &
desk_pid=$!
desk_ready() { curl -sf "http://127.0.0.1:$desk_metrics_port/readyz"; }
wait_for "the support desk (/readyz: the provider's keys, the ledger)" 30 desk_ready || { cat .demo/desk.log >&2; exit 1; }
say ""
say "support desk (logs: .demo/desk.log; the provider's: .demo/oidc.log):"
say "  console: $desk_url/desk/  in a Chromium-based browser on this machine (its session cookie is Secure, which"
say "           Chromium allows on http loopback). Sign in as ana (an agent), vic (a viewer) or lee (a lead): a user"
say "           name, no password. The sign-in page is the test provider's, HTTPS with a throwaway CA"
say "           (.demo/oidc/ca.pem): accept the browser's warning once."
say "  its API, as ana, with a token the test provider mints (what a helpdesk's sidebar would send):"
say "    token=\$(curl -s --cacert .demo/oidc/ca.pem -X POST $provider/test/mint -d '{\"sub\":\"ana\"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"token\"])')"
say "    curl -s -X POST $desk_url/desk/api/lookup -H \"Authorization: Bearer \$token\" -H 'Content-Type: application/json' \\"
say "        -d '{\"ticket\":\"DEMO-1\",\"user_id\":\"player-42\"}'"
token="$(curl -sf --cacert .demo/oidc/ca.pem -X POST "$provider/test/mint" -d '{"sub":"ana"}' | field token)"
say "  what the desk answers (every purchase granted to player-42, each with its case):"
curl -sf -X POST "$desk_url/desk/api/lookup" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"ticket":"DEMO-1","user_id":"player-42"}' | python3 -c '
import json, sys
for purchase in json.load(sys.stdin)["purchases"]:
    grant = (purchase.get("ledger") or {}).get("grant") or {}
    print("    %s  %-12s order %-13s %s" % (purchase["transaction_id"], purchase.get("product_id") or "-",
                                          grant.get("order_id") or "-", purchase["verdict"]))
' >&2
say "  and audited it (receipt-worker ledger audit, newest first):"
"$bin/receipt-worker" ledger audit --config config/local.properties --limit 1 | sed 's/^/    /' >&2

if $once; then
    status=0; wait "$results_pid" || status=$?
    results_pid=""
    say ""
    say "metrics after the run:"
    curl -s "http://127.0.0.1:$metrics_port/metrics" | grep -E '^receipt_worker_(jobs_consumed_total|decisions_total\{.*\} [1-9]|apple_retries_total|notifications_(received|processed)_total\{.*\} [1-9]|consumption_answers_total\{.*\} [1-9]|unclaimed_credits_published_total|ready )' >&2
    exit "$status"
fi
say "(Ctrl-C stops everything)"
wait "$results_pid"
