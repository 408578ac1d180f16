#!/usr/bin/env bash
# bench/ab_s8_storm.sh OLD_TROUPE NEW_TROUPE [ROUNDS] [SECONDS]: S8 while the commander is
# busy — lease-protected increments of one hot key (wrk -t2 -c64 over 1,000 users'
# cookies, as in bench/harness.cpp "S8") during a placement storm (wrk -t1 -c16 of
# cookieless GET /api/whoami: every request a new guest, placed by the commander).
# Two troupe binaries (e.g. one built from an older commit), both nodes up for the whole
# run, alternating ABAB; prints each round (increments/s, the storm's requests/s, and the
# exactness check: final value − 2xx answers, 0 to 64) and the median ratio new/old.
# NODE_FLAGS (env): more flags for both nodes, e.g. "--set node.actor_threads=2".
set -euo pipefail
cd "$(dirname "$0")/.."
old_bin=$1; new_bin=$2; rounds=${3:-5}; secs=${4:-10}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/troupe-ab-s8-storm.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086 # NODE_FLAGS is a list of flags
"$old_bin" node --listen 127.0.0.1:0 --deposit "$tmp/d1" ${NODE_FLAGS:-} > "$tmp/old.out" 2>/dev/null &
# shellcheck disable=SC2086
"$new_bin" node --listen 127.0.0.1:0 --deposit "$tmp/d2" ${NODE_FLAGS:-} > "$tmp/new.out" 2>/dev/null &
for f in old new; do for _ in $(seq 100); do grep -q listening "$tmp/$f.out" 2>/dev/null && break; sleep 0.1; done; done
old=$(grep -o 'http://[0-9.:]*' "$tmp/old.out"); new=$(grep -o 'http://[0-9.:]*' "$tmp/new.out")
bench/cookies.sh "$old" 1000 "$tmp/co"; bench/cookies.sh "$new" 1000 "$tmp/cn"
# run URL COOKIES KEY: prints "increments/s storm_req/s final−2xx".
run() {
  local url=$1 cookies=$2 key=$3
  wrk -t1 -c16 -d"$((secs + 1))s" "$url/api/whoami" > "$tmp/storm.txt" &
  local storm=$!
  sleep 0.5  # the storm is under way before the measured run starts
  COOKIES="$cookies" METHOD=POST PATH_="/api/global/$key/add" BODY='{"delta":1}' \
    wrk -t2 -c64 -d"${secs}s" -s bench/sticky.lua "$url/api/global/$key/add" > "$tmp/s8.txt"
  wait "$storm"
  local rps total non2xx value
  rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/s8.txt")
  total=$(awk '/requests in/ {print $1}' "$tmp/s8.txt")
  non2xx=$(awk '/Non-2xx/ {print $5}' "$tmp/s8.txt"); non2xx=${non2xx:-0}
  value=$(curl -s -H "Cookie: $(head -1 "$cookies")" "$url/api/global/$key" | jq '.value // 0')
  # increments/s counts the 2xx answers only (as the harness does)
  awk -v r="$rps" -v t="$total" -v n="$non2xx" -v v="$value" \
    -v s="$(awk '/Requests\/sec/ {print $2}' "$tmp/storm.txt")" \
    'BEGIN {printf "%.0f %.0f %d\n", r * (t - n) / t, s, v - (t - n)}'
}
ratios=(); olds=(); news=()
for ((r = 1; r <= rounds; r++)); do
  read -r a a_storm a_gap < <(run "$old" "$tmp/co" "hot-$r")
  read -r b b_storm b_gap < <(run "$new" "$tmp/cn" "hot-$r")
  ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b / a}')
  ratios+=("$ratio"); olds+=("$a"); news+=("$b")
  echo "round $r: old $a incr/s (storm $a_storm req/s, gap $a_gap) | new $b incr/s (storm $b_storm req/s, gap $b_gap) | ratio $ratio | load $(cut -d' ' -f1 /proc/loadavg)"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "median old: $(median "${olds[@]}") incr/s; median new: $(median "${news[@]}") incr/s"
echo "median ratio new/old: $(median "${ratios[@]}")"
