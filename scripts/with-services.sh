#!/usr/bin/env bash
# Runs a command with a fresh local Kafka broker and PostgreSQL, both on free loopback ports, and stops
# them afterwards however the command ends (exit, failure, Ctrl-C, SIGTERM).
#   scripts/with-services.sh swift test
# The command sees KAFKA_BOOTSTRAP, POSTGRES_URL and TANSU_BIN.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/services.sh"
trap services_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
services_start_kafka
services_start_postgres
export TANSU_BIN
"$@"
