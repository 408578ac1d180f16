#!/usr/bin/env bash
# The run command: set up, build, and start a node serving the notes sample on
# http://127.0.0.1:8080 (extra arguments go to `troupe node`).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec ./build/bin/troupe node --listen 127.0.0.1:8080 --deposit ./deposit --app notes "$@"
