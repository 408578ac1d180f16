#!/usr/bin/env bash
# bench/global_reply.sh [BIN] [SECONDS]: the global store with
# commander.durability = "reply" (every change durable before its answer), on a
# fresh deposit under $TMPDIR: wrk -t2 -c64 of lease-protected adds on one hot
# key (the final value must be the 2xx answers + at most 64 in flight), then of
# PUTs spread over 64 keys. BIN defaults to build/bin/troupe.
set -euo pipefail
bin=${1:-build/bin/troupe}; seconds=${2:-5}
dir=$(mktemp -d "${TMPDIR:-/tmp}/troupe-global-reply.XXXXXX")
"$bin" node --listen 127.0.0.1:0 --deposit "$dir/deposit" --set commander.durability=reply \
  > "$dir/out" 2> "$dir/err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do grep -q listening "$dir/out" && break; sleep 0.1; done
url=$(sed -n 's/.*listening on //p' "$dir/out")
cat > "$dir/add.lua" <<'LUA'
wrk.method = "POST"; wrk.body = '{"delta":1}'; wrk.headers["Content-Type"] = "application/json"
LUA
cat > "$dir/put.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  return wrk.format("PUT", "/api/global/k" .. (n % 64), {["Content-Type"] = "application/json"}, '{"value":' .. n .. '}')
end
LUA
echo "== lease adds, one hot key"
wrk -t2 -c64 -d"${seconds}s" -s "$dir/add.lua" "$url/api/global/hot/add" | grep -E "requests in|Requests/sec|Non-2xx"
echo "final value: $(curl -s "$url/api/global/hot")"
echo "== PUTs over 64 keys"
wrk -t2 -c64 -d"${seconds}s" -s "$dir/put.lua" "$url" | grep -E "requests in|Requests/sec|Non-2xx"
