#!/usr/bin/env bash
# The test command: set up, build, and run every test (unit and integration).
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --tests
ctest --test-dir build --output-on-failure -j 2 --timeout 300
