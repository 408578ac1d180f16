#!/usr/bin/env bash
# bench/process_workers.sh [BIN] [ROUNDS] [SECONDS] [KILLS]: what worker processes cost
# and how fast they heal (issue 13, docs/SUPERVISION.md "Workers as processes").
#  1. S1 (sticky GET /api/counter over 1,000 users, wrk -t2 -c64) against three nodes of the
#     same binary, group.default.isolation = "thread", = "process" (its requests on the
#     worker pipes, issue 26) and = "process" with node.worker_pipes = false (through the
#     forwarder, as before), 2 workers each, the order turned every round; each round and
#     the median ratios process/thread and forwarder/thread.
#  2. KILLS times: kill -9 of the worker process hosting one user, then the time until
#     that user is served again (200), polled with curl (a few ms of resolution); p50/p99.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/bin/troupe}; rounds=${2:-4}; secs=${3:-5}; kills=${4:-10}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$tmp"' EXIT
# max_restarts: the kills below are a crash storm by design (10 within seconds); the group's
# restart intensity would make it degraded after 5 (default) and hold the next user 30 s.
common=(--set group.default.workers=2 --set group.default.durability=reply --set group.default.max_restarts=1000)
"$bin" node --listen 127.0.0.1:0 --deposit "$tmp/dt" "${common[@]}" --set group.default.isolation=thread > "$tmp/t.out" 2>/dev/null &
"$bin" node --listen 127.0.0.1:0 --deposit "$tmp/dp" "${common[@]}" --set group.default.isolation=process > "$tmp/p.out" 2>"$tmp/p.err" &
proc_node=$!
"$bin" node --listen 127.0.0.1:0 --deposit "$tmp/df" "${common[@]}" --set group.default.isolation=process \
  --set node.worker_pipes=false > "$tmp/f.out" 2>/dev/null &
for f in t p f; do for _ in $(seq 200); do grep -q listening "$tmp/$f.out" 2>/dev/null && break; sleep 0.1; done; done
thread=$(grep -o 'http://[0-9.:]*' "$tmp/t.out"); process=$(grep -o 'http://[0-9.:]*' "$tmp/p.out")
forwarder=$(grep -o 'http://[0-9.:]*' "$tmp/f.out")
sleep 1  # the worker processes hand their workers over
bench/cookies.sh "$thread" 1000 "$tmp/ct"; bench/cookies.sh "$process" 1000 "$tmp/cp"; bench/cookies.sh "$forwarder" 1000 "$tmp/cf"
run() { COOKIES="$2" wrk -t2 -c64 -d"${secs}s" -s bench/sticky.lua --latency "$1/api/counter" > "$tmp/wrk" ;
        awk '/Requests\/sec/ {r=$2} / 99%/ {p=$2} END {print r, p}' "$tmp/wrk"; }
ratios=(); fratios=()
for ((r = 1; r <= rounds; r++)); do
  case $((r % 3)) in
    1) a=$(run "$thread" "$tmp/ct"); b=$(run "$process" "$tmp/cp"); c=$(run "$forwarder" "$tmp/cf") ;;
    2) b=$(run "$process" "$tmp/cp"); c=$(run "$forwarder" "$tmp/cf"); a=$(run "$thread" "$tmp/ct") ;;
    0) c=$(run "$forwarder" "$tmp/cf"); a=$(run "$thread" "$tmp/ct"); b=$(run "$process" "$tmp/cp") ;;
  esac
  ratio=$(awk -v a="${a%% *}" -v b="${b%% *}" 'BEGIN {printf "%.3f", b / a}'); ratios+=("$ratio")
  fratio=$(awk -v a="${a%% *}" -v c="${c%% *}" 'BEGIN {printf "%.3f", c / a}'); fratios+=("$fratio")
  echo "round $r: thread ${a%% *} req/s (p99 ${a##* }) | process ${b%% *} req/s (p99 ${b##* }) | ratio $ratio" \
       "| forwarder ${c%% *} req/s (p99 ${c##* }) | ratio $fratio"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "S1 median ratio process/thread:", a[int((NR+1)/2)]}'
printf '%s\n' "${fratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "S1 median ratio process without pipes (forwarder)/thread:", a[int((NR+1)/2)]}'

# -- kill -9 to served again -----------------------------------------------------------------
jar="$tmp/jar"
curl -s -c "$jar" -b "$jar" -X POST "$process/api/login" -d '{"user":"victim"}' > /dev/null
times=()
for ((k = 1; k <= kills; k++)); do
  worker=$(curl -s -b "$jar" "$process/api/whoami" | sed -n 's/.*"worker":"\([^"]*\)".*/\1/p')
  pid=$(pgrep -P "$proc_node" -f -- "--worker $worker( |\$)" | head -1)
  [ -n "$pid" ] || { echo "no process for worker $worker" >&2; exit 1; }
  t0=$(date +%s%N)
  kill -9 "$pid"
  until [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" --max-time 5 "$process/api/counter")" = 200 ]; do :; done
  t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 )); times+=("$ms")
  echo "kill $k: worker $worker pid $pid: served again after $ms ms"
  sleep 1.2  # past the young-death pause of a replacement (docs/SUPERVISION.md)
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {p99=int(NR*0.99); if (p99<1) p99=1; if (p99>NR) p99=NR;
  print "kill -9 to served again: p50", a[int((NR+1)/2)], "ms, p99 (max of", NR ")", a[NR], "ms"}'
