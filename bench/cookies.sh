#!/usr/bin/env bash
# bench/cookies.sh URL N OUT: mints N troupe connections (one guest user each)
# before a timed run and writes their cookies, one per line, to OUT.
set -euo pipefail
url=$1; n=$2; out=$3
: > "$out"
for ((i = 0; i < n; i++)); do
  curl -s -o /dev/null -D - "$url/api/whoami" | tr -d '\r' | sed -n 's/^[Ss]et-[Cc]ookie: \(troupe_cid=[^;]*\).*/\1/p' >> "$out"
done
