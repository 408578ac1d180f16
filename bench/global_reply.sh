#!/usr/bin/env bash
# bench/global_reply.sh [BIN] [SECONDS] [PG_URL]: the global store with
# commander.durability = "reply" (every change durable before its answer), on a
# fresh deposit under $TMPDIR: wrk -t2 -c64 of lease-protected adds on one hot
# key (the final value must be the 2xx answers + at most 64 in flight), then of
# PUTs spread over 64 keys. BIN defaults to build/bin/troupe.
# With PG_URL (e.g. what scripts/pg_server.sh start DIR prints) it runs twice in
# one invocation: on the filesystem deposit, then on PostgreSQL in a fresh schema
# (bench_global_<pid>, dropped at the end; needs psql), and ends with both
# backends' increments/s side by side.
set -euo pipefail
bin=${1:-build/bin/troupe}; seconds=${2:-5}; pg_url=${3:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/troupe-global-reply.XXXXXX")
pid=
schema=
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if [[ -n "$schema" ]]; then
    psql -X -q "$pg_url" -c "SET client_min_messages = warning" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
cat > "$work/add.lua" <<'LUA'
wrk.method = "POST"; wrk.body = '{"delta":1}'; wrk.headers["Content-Type"] = "application/json"
LUA
cat > "$work/put.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  return wrk.format("PUT", "/api/global/k" .. (n % 64), {["Content-Type"] = "application/json"}, '{"value":' .. n .. '}')
end
LUA

# run BACKEND [node flags...]: one node, both wrk runs; "BACKEND adds/s puts/s" into $work/summary.
run() {
  local backend=$1; shift
  local dir="$work/$backend"
  mkdir -p "$dir"
  echo "== $backend (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  "$bin" node --listen 127.0.0.1:0 --deposit "$dir/deposit" --set commander.durability=reply "$@" \
    > "$dir/out" 2> "$dir/err" &
  pid=$!
  for _ in $(seq 100); do grep -qs listening "$dir/out" && break; sleep 0.1; done
  local url
  url=$(sed -n 's/.*listening on //p' "$dir/out")
  if [[ -z "$url" ]]; then
    echo "the node did not start; its log:" >&2
    tail -n 20 "$dir/err" >&2
    exit 1
  fi
  echo "-- lease adds, one hot key"
  wrk -t2 -c64 -d"${seconds}s" -s "$work/add.lua" "$url/api/global/hot/add" > "$dir/add.txt"
  grep -E "requests in|Requests/sec|Non-2xx" "$dir/add.txt"
  echo "final value: $(curl -s "$url/api/global/hot")"
  echo "-- PUTs over 64 keys"
  wrk -t2 -c64 -d"${seconds}s" -s "$work/put.lua" "$url" > "$dir/put.txt"
  grep -E "requests in|Requests/sec|Non-2xx" "$dir/put.txt"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  pid=
  echo "$backend $(awk '/Requests\/sec/ {print $2}' "$dir/add.txt") $(awk '/Requests\/sec/ {print $2}' "$dir/put.txt")" \
    >> "$work/summary"
}

run filesystem
if [[ -n "$pg_url" ]]; then
  schema=bench_global_$$
  run postgres --set deposit.backend=postgres --set "deposit.url=$pg_url" --set "deposit.schema=$schema"
fi
echo "== summary (requests/s; durability = reply, wrk -t2 -c64, ${seconds} s each)"
printf '%-10s %16s %14s\n' backend "lease adds/s" "PUTs/s"
while read -r b a p; do printf '%-10s %16s %14s\n' "$b" "$a" "$p"; done < "$work/summary"
