#!/usr/bin/env bash
# The test command: installs what is missing, builds with warnings as errors, and runs every test against
# a real Kafka broker and a real PostgreSQL started for this run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
swift format lint --strict --recursive Sources Tests  # the house style (.swift-format): any finding fails
swift build --build-tests
bash scripts/with-services.sh swift test --skip-build "$@"
