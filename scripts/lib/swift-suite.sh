#!/usr/bin/env bash
# The whole Swift suite as the test command runs it (scripts/test.sh; scripts/flake-hunt.sh runs it again and
# again): the tests built already (`swift build --build-tests`), in the order that keeps the timing assertions
# honest on two cores. Exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# At most 16 tests at once: on two cores with other work beside it (a CPU hog on both cores, measured), 300
# tests at once starved the broker's group coordination and the tests' own waits; 16 keeps the idle run as
# fast and passes the busy one (docs/internals.md, "The test command").
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-16}"
# The HTTP server's flood and idle-connection tests first and alone: 40,000 pipelined requests would
# starve the timing assertions of the tests running beside them (and their own probes).
swift test --skip-build --filter HTTPServerKitTests
# The deadline sweeper's test holds every thread of Swift's pool until its deadline, on purpose: alone too.
swift test --skip-build --filter DeadlineSweeperTests
# Then the tests that assert a rate or a moment (requests a second at the simulator, a thousand transfers
# in flight together, jobs in flight when SIGTERM lands, unready within 10 s of a hung PostgreSQL), beside
# each other only: on two cores the other 240 tests running at once stall threads for seconds, which is
# in no figure of the worker's. The rest after them, all at once.
# Last, the ledger's tests again with PostgreSQL behind PgBouncer in transaction pooling, its defaults
# (PgBouncerEndToEndTests runs the worker through it in both pooling modes); not the test of the server's
# connection limit, which PgBouncer stands in front of by design (it queues instead), nor the pool's replacing of a
# connection whose server turned read-only: behind PgBouncer a new connection may get the same server connection,
# whose replacement is PgBouncer's (its server checks), not the worker's.
timed='RateGovernorEndToEndTests|HTTPClientTests|ShutdownTests|LedgerHealthEndToEndTests|ConnectionFloodTests'
bash scripts/with-services.sh bash -c "
    swift test --skip-build --filter '$timed' &&
    swift test --skip-build --skip 'HTTPServerKitTests|DeadlineSweeperTests' --skip '$timed' &&
    POSTGRES_URL=\"\$PGBOUNCER_TRANSACTION_URL\" swift test --skip-build --filter LedgerTests --skip 'ConnectionLimitTests|PostgresPoolTests'"
