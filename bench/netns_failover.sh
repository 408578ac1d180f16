#!/usr/bin/env bash
# The time from cutting a user's host off to his first 200 through HAProxy
# (issue 28, "Figures per fault kind": a member cut off), on the cluster of
# scripts/netns_cluster.sh: three members with durability "reply", PostgreSQL,
# HAProxy. Each round: a new user increments three times, his host is cut off
# (its veth down), his counter is read through HAProxy every 50 ms until it
# answers 200 with every acknowledged increment; then the link heals and the
# member rejoins. Prints each round and p50/p99/max (goal: within
# cluster.failure_timeout_ms + 1 s). Needs root.
#   bench/netns_failover.sh [ROUNDS] [BINARY]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-10}
bin=${2:-$root/build/bin/troupe}
export TROUPE_NETNS_PREFIX=trbench TROUPE_NETNS_SUBNET=10.79.0
export TROUPE_NETNS_DIR=/tmp/troupe-netns-bench-$$
export TROUPE_NETNS_ARGS="--set group.default.durability=reply"
script=$root/scripts/netns_cluster.sh
lb=http://10.79.0.3:8080
trap '"$script" down >/dev/null 2>&1' EXIT

"$script" up 3 "$bin" >/dev/null
client() { ip netns exec trbench-client curl -s -m 1 "$@"; }
all_healthy() { [[ $("$script" status | grep -c 'health 200') == 3 ]]; }
now_ms() { date +%s%3N; }
# Every wait is bounded: a cluster that does not recover is a result, reported, not a hang.
give_up() { echo "round $r: $1 within 60 s: stopping (logs: $TROUPE_NETNS_DIR)"; tail -n 5 "$TROUPE_NETNS_DIR"/n*.log; exit 1; }
times=()
for r in $(seq 1 "$rounds"); do
  jar=$(mktemp)
  deadline=$((SECONDS + 60))
  for _ in 1 2 3; do
    until [[ $(client -o /dev/null -w '%{http_code}' -b "$jar" -c "$jar" -X POST "$lb/api/counter/incr") == 200 ]]; do
      ((SECONDS < deadline)) || give_up "a new user's increments were not served"
      sleep 0.2
    done
  done
  home=""
  until [[ -n "$home" ]]; do  # right after a rejoin the cluster may still settle (docs/CLUSTER.md "Known issue")
    home=$(client -b "$jar" "$lb/api/whoami" | sed -n 's/.*"node":"n\([0-9]\)".*/\1/p')
    ((SECONDS < deadline)) || give_up "whoami did not answer"
    [[ -n "$home" ]] || sleep 0.2
  done
  "$script" isolate "$home"
  t0=$(now_ms)
  until [[ $(client -w ' %{http_code}' -b "$jar" -c "$jar" "$lb/api/counter") =~ \"count\":([0-9]+).*\ 200$ ]] &&
        ((BASH_REMATCH[1] >= 3)); do
    (($(now_ms) - t0 < 60000)) || give_up "n$home's user was not served again"
    sleep 0.05
  done
  ms=$(($(now_ms) - t0))
  times+=("$ms")
  echo "round $r: n$home cut off, served again after $ms ms"
  "$script" heal
  deadline=$((SECONDS + 60))
  until all_healthy; do
    ((SECONDS < deadline)) || give_up "the members were not all healthy again"
    sleep 0.2
  done
  rm -f "$jar"
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
pick() { echo "$sorted" | sed -n "$1p"; }
n=${#times[@]}
p50=$(pick $(((n + 1) / 2)))
p99=$(pick $(((n * 99 + 99) / 100)))
echo "member cut off → first 200 through HAProxy over $n rounds: p50 $p50 ms, p99 $p99 ms, max $(pick "$n") ms" \
     "(failure_timeout_ms 3000: goal ≤ 4000 ms)"
