#!/usr/bin/env bash
# The test command: set up, build, and run every test (unit and integration),
# against a throwaway PostgreSQL server (scripts/pg_server.sh), then every fuzz target for FUZZ_SECONDS (default 10) on its seed corpus
# (scripts/fuzz.sh: a clang build of the targets only, in build-fuzz/).
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --tests
# A throwaway PostgreSQL server for the tests of the PostgreSQL deposit (its
# own directory, a free port, stopped and removed at the end).
pg_dir="$(mktemp -d "${TMPDIR:-/tmp}/troupe-pg.XXXXXX")"
trap './scripts/pg_server.sh stop "$pg_dir" >/dev/null 2>&1 || true' EXIT
TROUPE_TEST_PG_URL="$(./scripts/pg_server.sh start "$pg_dir")"
export TROUPE_TEST_PG_URL TROUPE_TEST_PG_REQUIRED=1
ctest --test-dir build --output-on-failure -j 2 --timeout 300
./scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
