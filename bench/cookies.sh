#!/usr/bin/env bash
# bench/cookies.sh URL N OUT: mints N troupe connections (one guest user each)
# before a timed run and writes their cookies, one per line, to OUT. One curl
# process, one keep-alive connection, no cookie jar: every reply mints a new id.
set -euo pipefail
url=$1; n=$2; out=$3
urls=()
for ((i = 0; i < n; i++)); do urls+=("$url/api/whoami"); done
curl -s -D - "${urls[@]}" | tr -d '\r' \
  | sed -n 's/^[Ss]et-[Cc]ookie: \(troupe_cid=[^;]*\).*/\1/p' > "$out"
[ "$(wc -l < "$out")" -eq "$n" ] || { echo "cookies.sh: got $(wc -l < "$out") of $n cookies" >&2; exit 1; }
