#!/usr/bin/env bash
# The test command: set up, build, and run every test (unit and integration),
# then every fuzz target for FUZZ_SECONDS (default 10) on its seed corpus
# (scripts/fuzz.sh: a clang build of the targets only, in build-fuzz/).
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --tests
ctest --test-dir build --output-on-failure -j 2 --timeout 300
./scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
