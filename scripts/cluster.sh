#!/usr/bin/env bash
# scripts/cluster.sh N [TROUPE NODE ARGS...]
# Starts N cluster members on loopback sharing one deposit (./deposit-cluster),
# serving the notes sample: member i serves HTTP on 127.0.0.1:(8080+i-1) and
# talks to the others on 127.0.0.1:(7400+i-1); member 1 starts the cluster and
# the others join it. Prints every member's addresses and the console URL,
# then waits; Ctrl-C (or SIGTERM) stops every member (a soft quit each).
# Logs: ./cluster-logs/nI.log. Extra arguments go to every member
# (e.g. --set group.default.durability=reply). See docs/CLUSTER.md.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
shift || true
if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 32 ]; then
  echo "usage: scripts/cluster.sh N [TROUPE NODE ARGS...]   (1 <= N <= 32)" >&2
  exit 2
fi
[ -x build/bin/troupe ] || ./scripts/setup.sh

token="${TROUPE_NODE_ADMIN_TOKEN:-$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')}"
mkdir -p deposit-cluster cluster-logs
pids=()
stop() {
  trap - INT TERM
  echo "cluster: stopping ${#pids[@]} member(s)"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait || true
}
trap stop INT TERM

for ((i = 1; i <= n; i++)); do
  http=$((8080 + i - 1))
  peer=$((7400 + i - 1))
  join=()
  [ "$i" -gt 1 ] && join=(--join 127.0.0.1:7400)
  ./build/bin/troupe node --listen "127.0.0.1:$http" --deposit ./deposit-cluster --app notes \
    --admin-token "$token" --set "node.name=n$i" --set "cluster.listen=127.0.0.1:$peer" "${join[@]}" "$@" \
    > "cluster-logs/n$i.out" 2> "cluster-logs/n$i.log" &
  pids+=($!)
  # The next member joins through the first: wait until this one is in.
  for _ in $(seq 1 100); do
    grep -q "cluster: member n$i of" "cluster-logs/n$i.log" 2>/dev/null && break
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then
      echo "cluster: member n$i did not start:" >&2
      tail -n 20 "cluster-logs/n$i.log" >&2
      stop
      exit 1
    fi
    sleep 0.1
  done
  echo "member n$i: http://127.0.0.1:$http  cluster 127.0.0.1:$peer  log cluster-logs/n$i.log"
done
echo "console: http://127.0.0.1:8080/_troupe/console#token=$token  (any member's front serves any user)"
wait
