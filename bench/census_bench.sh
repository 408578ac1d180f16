#!/usr/bin/env bash
# bench/census_bench.sh [USERS] [ROUNDS] [SECONDS]: what the census costs.
#  1. A node with USERS guests (default 100,000): the latency of census pages
#     (first page, a deep offset, a state filter, a prefix, workers, one user's
#     detail), 30 requests each, p50 and max, over curl.
#  2. Sticky GET /api/counter over 1,000 of them (wrk -t2 -c64, keep-alive), with
#     and without a console open (bench/console_watch: the live channel at 1 Hz,
#     no browser CPU in the way), alternating in one run; the median ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
users=${1:-100000}; rounds=${2:-5}; secs=${3:-5}
((users >= 1000)) || { echo "census_bench: at least 1,000 users" >&2; exit 2; }
bin=build/bin
tmp=$(mktemp -d)
token=bench-$RANDOM$RANDOM
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$bin/troupe" node --listen 127.0.0.1:0 --deposit "$tmp/deposit" --admin-token "$token" \
  --set group.default.workers=2 > "$tmp/troupe.out" 2> "$tmp/troupe.err" &
node_pid=$!
for _ in $(seq 100); do grep -q listening "$tmp/troupe.out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$tmp/troupe.out" | head -1)
port=${url##*:}

echo "minting $users users..."
t0=$(date +%s.%N)
per=10000
minters=()
for ((done_ = 0; done_ < users; done_ += per)); do  # two curl processes at a time
  n=$(( users - done_ < per ? users - done_ : per ))
  bench/cookies.sh "$url" "$n" "$tmp/c$done_.txt" &
  minters+=($!)
  if ((${#minters[@]} == 2)); then wait "${minters[@]}"; minters=(); fi
done
((${#minters[@]} == 0)) || wait "${minters[@]}"
head -n 1000 "$tmp/c0.txt" > "$tmp/cookies.txt"
echo "  $(cat "$tmp"/c[0-9]*.txt | wc -l) users in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s;" \
     "node RSS $(awk '/VmRSS/ {print $2 / 1024 " MiB"}' /proc/$node_pid/status)"

auth="Authorization: Bearer $token"
some_user=$(curl -s -H "$auth" "$url/_troupe/census?limit=1&offset=$((users / 2))&probe=0" \
  | grep -o '"id":"user:[^"]*"' | head -1 | sed 's/"id":"\(.*\)"/\1/')
latency() {  # NAME PATH
  local samples
  samples=$(for _ in $(seq 30); do curl -s -o /dev/null -w '%{time_total}\n' -H "$auth" "$url$2"; done | sort -n)
  printf '| %-28s | %8.2f | %8.2f |\n' "$1" \
    "$(echo "$samples" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)] * 1000}')" \
    "$(echo "$samples" | tail -1 | awk '{print $1 * 1000}')"
}
echo
echo "census at $users users (ms, over curl, 30 requests each)"
echo "| query | p50 | max |"
echo "| --- | ---: | ---: |"
latency "first page (100 rows)" "/_troupe/census?limit=100"
latency "offset $((users / 2)) (100 rows)" "/_troupe/census?limit=100&offset=$((users / 2))"
latency "state=active (100 rows)" "/_troupe/census?limit=100&state=active&offset=1000"
latency "prefix=guest_A (100 rows)" "/_troupe/census?limit=100&prefix=guest_A"
latency "kind=worker" "/_troupe/census?kind=worker"
latency "one user in detail" "/_troupe/actors/$some_user"
latency "health (no census)" "/_troupe/health"

run() { COOKIES="$tmp/cookies.txt" wrk -t2 -c64 -d"${secs}s" --latency -s bench/sticky.lua "$url/api/counter" \
          | awk '/Requests\/sec/ {rps=$2} / 99%/ {p99=$2} /Non-2xx/ {bad=$4} END {print rps, p99, bad+0}'; }
echo
echo "sticky GET /api/counter, 1,000 of the $users users, wrk -t2 -c64 ${secs}s"
ratios=()
with_console() {
  "$bin/console_watch" "$port" "$token" > "$tmp/watch.out" 2>&1 &
  local watch_pid=$!
  sleep 1.5  # its full snapshot is out; from here on, a patch a second
  read -r b bp99 bbad < <(run)
  kill "$watch_pid"; wait "$watch_pid" 2>/dev/null || true
}
for ((r = 1; r <= rounds; r++)); do
  # Alternate which goes first (ABBA), so a drift of the machine cancels out.
  if ((r % 2)); then read -r a ap99 _ < <(run); with_console; else with_console; read -r a ap99 _ < <(run); fi
  ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b / a}')
  ratios+=("$ratio")
  echo "round $r: no console $a req/s (p99 $ap99) | console open $b req/s (p99 $bp99, non-2xx $bbad) | ratio $ratio | $(cat "$tmp/watch.out")"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "median ratio console-open/none:", a[int((NR+1)/2)]}'

# 3. The console's own cost, without wrk's noise: the node's CPU time (utime +
#    stime, /proc) over 20 s idle, without and with a console open.
cpu_ms() { awk '{print ($14 + $15) * 1000 / '"$(getconf CLK_TCK)"'}' "/proc/$node_pid/stat"; }
idle_cost() {  # prints CPU ms per second over 20 s
  local c0; c0=$(cpu_ms); sleep 20; awk -v a="$c0" -v b="$(cpu_ms)" 'BEGIN {printf "%.2f", (b - a) / 20}'
}
echo
quiet=$(idle_cost)
"$bin/console_watch" "$port" "$token" > "$tmp/watch.out" 2>&1 &
watch_pid=$!
sleep 1.5
watched=$(idle_cost)
kill "$watch_pid"; wait "$watch_pid" 2>/dev/null || true
echo "node CPU at rest, $users users: ${quiet} ms/s without a console, ${watched} ms/s with one open ($(cat "$tmp/watch.out"))"
