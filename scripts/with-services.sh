#!/usr/bin/env bash
# Runs a command with a fresh local Kafka broker and PostgreSQL, both on free loopback ports, and stops
# them afterwards however the command ends (exit, failure, Ctrl-C, SIGTERM).
#   scripts/with-services.sh swift test
# The command sees KAFKA_BOOTSTRAP, POSTGRES_URL and TANSU_BIN; and PGBOUNCER_TRANSACTION_URL and
# PGBOUNCER_SESSION_URL, that PostgreSQL behind Debian's PgBouncer in each pooling mode.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/services.sh"
trap services_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
services_start_kafka
services_start_postgres
services_start_pgbouncer transaction; export PGBOUNCER_TRANSACTION_URL="$PGBOUNCER_URL"
services_start_pgbouncer session; export PGBOUNCER_SESSION_URL="$PGBOUNCER_URL"
export TANSU_BIN
"$@"
