#!/usr/bin/env bash
# bench/instructions.sh [SECONDS] [troupe node flags...]: user-space instructions per
# warm request (issue 26), troupe against the minimal Beast server, both under
# callgrind (valgrind): sticky GET /api/counter over USERS (100) users' cookies
# (wrk -t1 -c4, keep-alive). A count of instructions, not of time: it does not move
# with the machine's load, so it shows what a change costs on the path where req/s
# figures drown in noise (it sees neither cache misses nor the kernel: S1 does).
# Each server is warmed up (each user twice); then what it does idle for SECONDS
# (its timers) is subtracted from what it does under load for SECONDS. Every thread
# counts. TROUPE=/path/to/troupe measures another build.
# Not S1's 1,000 users: at valgrind's pace each of them is asked only every few
# seconds, and what the node's timers do in between then outweighs the request
# (170k instructions a request; a real run over 5,000 users costs the same CPU per
# request as over 100). With 100, each is asked about as often as in S1.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-8}; shift || true
bin=build/bin
troupe_bin=${TROUPE:-$bin/troupe}
command -v valgrind > /dev/null || { echo "instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$tmp"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$tmp/beast.cg" "$bin/minimal_beast" 0 \
  > "$tmp/beast.out" 2> "$tmp/beast.vg" &
beast_pid=$!
valgrind --tool=callgrind --callgrind-out-file="$tmp/troupe.cg" "$troupe_bin" node --listen 127.0.0.1:0 \
  --deposit "$tmp/deposit" "$@" > "$tmp/troupe.out" 2> "$tmp/troupe.vg" &
troupe_pid=$!
for f in beast troupe; do  # slow to start under valgrind
  for _ in $(seq 600); do grep -q listening "$tmp/$f.out" 2>/dev/null && break; sleep 0.1; done
done
beast_url=$(grep -o 'http://[0-9.:]*' "$tmp/beast.out")
troupe_url=$(grep -o 'http://[0-9.:]*' "$tmp/troupe.out")
bench/cookies.sh "$troupe_url" "${USERS:-100}" "$tmp/cookies.txt"
load() { COOKIES="$tmp/cookies.txt" wrk -t1 -c4 -d"$2s" -s bench/sticky.lua "$1/api/counter" \
           | awk '/requests in/ {print $1}'; }
# dump NAME PID: the instructions counted since the last zeroing (a new dump file each time).
dump() {
  local before
  before=$(ls "$tmp/$1.cg".* 2> /dev/null | wc -l)
  callgrind_control -d "$2" > /dev/null 2>&1
  for _ in $(seq 100); do [ "$(ls "$tmp/$1.cg".* 2> /dev/null | wc -l)" -gt "$before" ] && break; sleep 0.1; done
  awk '/^(summary|totals):/ {print $2; exit}' "$(ls -t "$tmp/$1.cg".* | head -1)"
}
measure() {  # NAME PID URL → instructions per request
  local warm=0  # every user served at least twice first (a user's first request places and starts him)
  for _ in $(seq 40); do
    warm=$((warm + $(load "$3" 3)))
    [ "$warm" -ge $((2 * ${USERS:-100})) ] && break
  done
  local idle n busy
  callgrind_control -z "$2" > /dev/null 2>&1
  sleep "$secs"
  idle=$(dump "$1" "$2")
  callgrind_control -z "$2" > /dev/null 2>&1
  n=$(load "$3" "$secs")
  busy=$(dump "$1" "$2")
  awk -v idle="$idle" -v busy="$busy" -v n="$n" -v name="$1" \
    'BEGIN {printf "%s: %d instructions over %d requests, %d while idle as long: %.0f per request\n", name, busy, n, idle, (busy - idle) / n}'
}
beast=$(measure beast "$beast_pid" "$beast_url"); echo "$beast"
troupe=$(measure troupe "$troupe_pid" "$troupe_url"); echo "$troupe"
awk -v b="$(echo "$beast" | awk '{print $(NF-2)}')" -v t="$(echo "$troupe" | awk '{print $(NF-2)}')" \
  'BEGIN {printf "troupe / minimal beast: %.2f x the instructions per request\n", t / b}'
