#!/usr/bin/env bash
# The benchmark harness, one command: installs what it needs (Debian's wrk and
# nginx-light, Node.js if absent, the Express peer's npm packages from its
# committed package-lock.json), builds, and runs troupe_bench, which starts each
# server on loopback, drives it with wrk, and writes bench/RESULTS.md and
# bench/RESULTS.json. Arguments go to troupe_bench (--runs N, --seconds S,
# --only S1,S8, --smoke). Takes about 20 minutes with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
missing=()
for p in wrk nginx-light; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v node > /dev/null && command -v npm > /dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
  echo "bench: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Debian's nginx package starts a system nginx on port 80; the harness runs its own.
if [ ! -d bench/express/node_modules ]; then
  (cd bench/express && npm ci --no-audit --no-fund --loglevel=error)
fi
# setup.sh builds the node only and leaves the benchmarks off in a fresh build/.
cmake -S . -B build -DTROUPE_BUILD_BENCH=ON > /dev/null
cmake --build build --target troupe_bench
exec build/bin/troupe_bench "$@"
