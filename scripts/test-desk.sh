#!/usr/bin/env bash
# The support desk end to end (Tests/desk/test_desk.py): `receipt-worker desk` behind the test OpenID Connect
# provider, the App Store simulator, a real Kafka broker, the SQLite ledger and then PostgreSQL, the console in a
# headless Chromium. Uses the debug binaries already built (scripts/test.sh builds them first; alone: swift build).
#   scripts/test-desk.sh                                   every test, both ledgers (about a minute)
#   scripts/test-desk.sh SQLiteLedger                      one ledger; or one test:
#   scripts/test-desk.sh SQLiteLedger.test_hostile_tokens_are_refused_with_nothing_recorded
# Starts its own broker and PostgreSQL (scripts/with-services.sh) unless KAFKA_BOOTSTRAP, TANSU_BIN and
# POSTGRES_URL are already set. DESK_SCREENSHOT: where the console's screenshot goes (default below); DESK_KEEP=1
# keeps the run's configuration and logs (they are kept anyway when a test fails).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DESK_BIN="${DESK_BIN:-$PWD/.build/debug}"
for binary in receipt-worker appstore-sim; do
    if [ ! -x "$DESK_BIN/$binary" ]; then
        echo "test-desk: $DESK_BIN/$binary is not built (swift build first)" >&2
        exit 2
    fi
done
# Outside the test run's temporary directory, which scripts/test.sh removes when everything passed.
export DESK_SCREENSHOT="${DESK_SCREENSHOT:-$PWD/.build/desk-tests/console.png}"
mkdir -p "$(dirname "$DESK_SCREENSHOT")"
rm -f "$DESK_SCREENSHOT" "${DESK_SCREENSHOT%.*}"-postgres.png
tests=(.deps/venv/bin/python Tests/desk/test_desk.py "$@")
status=0
if [ -n "${KAFKA_BOOTSTRAP:-}" ] && [ -n "${TANSU_BIN:-}" ] && [ -n "${POSTGRES_URL:-}" ]; then
    "${tests[@]}" || status=$?
else
    bash scripts/with-services.sh "${tests[@]}" || status=$?
fi
for shot in "$DESK_SCREENSHOT" "${DESK_SCREENSHOT%.*}"-postgres.png; do
    if [ -f "$shot" ]; then echo "test-desk: the console's screenshot: $shot" >&2; fi
done
exit "$status"
