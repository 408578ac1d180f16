#!/usr/bin/env bash
# bench/s1_quick.sh [ROUNDS] [SECONDS] [troupe node flags...]: sticky GET /api/counter
# over 1,000 users (wrk -t2 -c64, keep-alive) against troupe and the minimal Beast
# server, alternating in one run; prints each round and the median ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; secs=${2:-5}; shift 2 || true
bin=build/bin
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$bin/minimal_beast" 0 > "$tmp/beast.out" &
"$bin/troupe" node --listen 127.0.0.1:0 --deposit "$tmp/deposit" "$@" > "$tmp/troupe.out" 2> "$tmp/troupe.err" &
for f in beast troupe; do
  for _ in $(seq 100); do grep -q listening "$tmp/$f.out" 2>/dev/null && break; sleep 0.1; done
done
beast_url=$(grep -o 'http://[0-9.:]*' "$tmp/beast.out")
troupe_url=$(grep -o 'http://[0-9.:]*' "$tmp/troupe.out")
bench/cookies.sh "$troupe_url" 1000 "$tmp/cookies.txt"
run() { COOKIES="$tmp/cookies.txt" wrk -t2 -c64 -d"${secs}s" --latency -s bench/sticky.lua "$1/api/counter" \
          | awk '/Requests\/sec/ {rps=$2} / 99%/ {p99=$2} /Non-2xx/ {bad=$4} END {print rps, p99, bad+0}'; }
ratios=()
for ((r = 1; r <= rounds; r++)); do
  read -r b bp99 _ < <(run "$beast_url")
  read -r t tp99 tbad < <(run "$troupe_url")
  ratio=$(awk -v t="$t" -v b="$b" 'BEGIN {printf "%.3f", t / b}')
  ratios+=("$ratio")
  echo "round $r: minimal beast $b req/s (p99 $bp99) | troupe $t req/s (p99 $tp99, non-2xx $tbad) | ratio $ratio"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "median ratio troupe/minimal-beast:", a[int((NR+1)/2)]}'
