#!/usr/bin/env bash
# Sets up, builds and runs every test: the README's test command, and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
# One test at a time: integration tests run several processes each, and the machines have
# two cores. Every test has its own timeout (tests/CMakeLists.txt).
ctest --test-dir build --output-on-failure --timeout 600 "$@"
