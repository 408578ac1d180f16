#!/usr/bin/env bash
# bench/allocs.sh [REQUESTS_SECONDS] [troupe node flags...]: heap allocations per warm
# request (issue 26), troupe against the minimal Beast server, one counter for both
# (build/bin/libtroupe_alloc_count.so, preloaded): sticky GET /api/counter over 1,000
# users' cookies (wrk -t2 -c64, keep-alive). Each server is warmed up (2 s), then its
# count is read (SIGUSR2) before and after SECONDS of load; allocations / requests.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}; shift || true
bin=build/bin
troupe_bin=${TROUPE:-$bin/troupe}  # another build: TROUPE=/path/to/troupe
lib=$PWD/$bin/libtroupe_alloc_count.so
[ -f "$lib" ] || { echo "allocs.sh: build $lib first (ninja -C build troupe_alloc_count)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$tmp"' EXIT
ALLOC_COUNT_FILE="$tmp/beast.count" LD_PRELOAD="$lib" "$bin/minimal_beast" 0 > "$tmp/beast.out" &
beast_pid=$!
ALLOC_COUNT_FILE="$tmp/troupe.count" LD_PRELOAD="$lib" "$troupe_bin" node --listen 127.0.0.1:0 \
  --deposit "$tmp/deposit" "$@" > "$tmp/troupe.out" 2> "$tmp/troupe.err" &
troupe_pid=$!
. bench/peers.sh  # beast_url, troupe_url, $tmp/cookies.txt
# count NAME PID: the process's allocations so far (it appends one line per SIGUSR2).
count() {
  local before=0
  [ -f "$tmp/$1.count" ] && before=$(wc -l < "$tmp/$1.count")
  kill -USR2 "$2"
  for _ in $(seq 100); do
    [ -f "$tmp/$1.count" ] && [ "$(wc -l < "$tmp/$1.count")" -gt "$before" ] && break
    sleep 0.02
  done
  tail -n 1 "$tmp/$1.count"
}
requests() { COOKIES="$tmp/cookies.txt" wrk -t2 -c64 -d"$2s" -s bench/sticky.lua "$1/api/counter" \
               | awk '/requests in/ {print $1}'; }
measure() {  # NAME PID URL → allocations per request
  requests "$3" 2 > /dev/null
  local a n b
  a=$(count "$1" "$2")
  n=$(requests "$3" "$secs")
  b=$(count "$1" "$2")
  awk -v a="$a" -v b="$b" -v n="$n" -v name="$1" \
    'BEGIN {printf "%s: %d allocations over %d requests: %.2f per request\n", name, b - a, n, (b - a) / n}'
}
beast=$(measure beast "$beast_pid" "$beast_url"); echo "$beast"
troupe=$(measure troupe "$troupe_pid" "$troupe_url"); echo "$troupe"
awk -v b="$(echo "$beast" | awk '{print $(NF-2)}')" -v t="$(echo "$troupe" | awk '{print $(NF-2)}')" \
  'BEGIN {printf "troupe / minimal beast: %.2f x the allocations per request\n", t / b}'
