#!/usr/bin/env bash
# bench/ab_s1.sh OLD_TROUPE NEW_TROUPE [ROUNDS] [SECONDS]: what a change costs. Sticky GET
# /api/counter over 1,000 users (wrk -t2 -c64) against two troupe binaries (e.g. one
# built from an older commit in a git worktree), alternating ABBA in one run; prints
# each round and the median ratio new/old.
set -euo pipefail
cd "$(dirname "$0")/.."
old_bin=$1; new_bin=$2; rounds=${3:-6}; secs=${4:-5}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$tmp"' EXIT
"$old_bin" node --listen 127.0.0.1:0 --deposit "$tmp/d1" > "$tmp/old.out" 2>/dev/null &
"$new_bin" node --listen 127.0.0.1:0 --deposit "$tmp/d2" > "$tmp/new.out" 2>/dev/null &
for f in old new; do for _ in $(seq 100); do grep -q listening "$tmp/$f.out" 2>/dev/null && break; sleep 0.1; done; done
old=$(grep -o 'http://[0-9.:]*' "$tmp/old.out"); new=$(grep -o 'http://[0-9.:]*' "$tmp/new.out")
bench/cookies.sh "$old" 1000 "$tmp/co"; bench/cookies.sh "$new" 1000 "$tmp/cn"
run() { COOKIES="$2" wrk -t2 -c64 -d"${secs}s" -s bench/sticky.lua "$1/api/counter" | awk '/Requests\/sec/ {print $2}'; }
ratios=()
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then a=$(run "$old" "$tmp/co"); b=$(run "$new" "$tmp/cn"); else b=$(run "$new" "$tmp/cn"); a=$(run "$old" "$tmp/co"); fi
  ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b / a}'); ratios+=("$ratio")
  echo "round $r: old $a req/s | new $b req/s | ratio $ratio"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "median ratio new/old:", a[int((NR+1)/2)]}'
