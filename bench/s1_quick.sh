#!/usr/bin/env bash
# bench/s1_quick.sh [ROUNDS] [SECONDS] [troupe node flags...]: sticky GET /api/counter
# over 1,000 users (wrk -t2 -c64, keep-alive, --latency) against troupe, the minimal
# Beast server and, when it is installed, nginx (`return 200` of the same body, one
# worker, no access log), in turn in each round of one run; prints each round and the
# median ratios troupe/minimal-beast and troupe/nginx, and the p99 of each.
# Env: BEAST_THREADS, the minimal server's threads (1; pair it with
# `--set node.io_threads=N`); METHOD and PATH_ (bench/sticky.lua), e.g. S2:
# METHOD=POST PATH_=/api/counter/incr bench/s1_quick.sh 5 5.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; secs=${2:-5}; shift 2 || true
bin=build/bin
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$tmp"' EXIT
"$bin/minimal_beast" 0 "${BEAST_THREADS:-1}" > "$tmp/beast.out" &
"$bin/troupe" node --listen 127.0.0.1:0 --deposit "$tmp/deposit" "$@" > "$tmp/troupe.out" 2> "$tmp/troupe.err" &
nginx_url=""
if command -v nginx > /dev/null; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$tmp/nginx"
  cat > "$tmp/nginx/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $tmp/nginx; proxy_temp_path $tmp/nginx; fastcgi_temp_path $tmp/nginx; uwsgi_temp_path $tmp/nginx; scgi_temp_path $tmp/nginx;
  server { listen 127.0.0.1:$port; location / { default_type application/json; return 200 '{"count":0}'; } }
}
CONF
  nginx -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" &
  nginx_url="http://127.0.0.1:$port"
  for _ in $(seq 100); do curl -sf "$nginx_url/api/counter" -o /dev/null && break; sleep 0.1; done
fi
. bench/peers.sh  # beast_url, troupe_url, $tmp/cookies.txt
run() { COOKIES="$tmp/cookies.txt" wrk -t2 -c64 -d"${secs}s" --latency -s bench/sticky.lua "$1/api/counter" \
          | awk '/Requests\/sec/ {rps=$2} / 99%/ {p99=$2} /Non-2xx/ {bad=$4} END {print rps, p99, bad+0}'; }
beast_ratios=(); nginx_ratios=()
for ((r = 1; r <= rounds; r++)); do
  read -r b bp99 _ < <(run "$beast_url")
  read -r t tp99 tbad < <(run "$troupe_url")
  line="round $r: minimal beast $b req/s (p99 $bp99) | troupe $t req/s (p99 $tp99, non-2xx $tbad)"
  beast_ratios+=("$(awk -v t="$t" -v b="$b" 'BEGIN {printf "%.3f", t / b}')")
  line+=" | troupe/beast ${beast_ratios[-1]}"
  if [ -n "$nginx_url" ]; then
    read -r n np99 _ < <(run "$nginx_url")
    nginx_ratios+=("$(awk -v t="$t" -v n="$n" 'BEGIN {printf "%.3f", t / n}')")
    line+=" | nginx $n req/s (p99 $np99) | troupe/nginx ${nginx_ratios[-1]}"
  fi
  echo "$line"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median ratio troupe/minimal-beast: $(median "${beast_ratios[@]}")"
[ -n "$nginx_url" ] && echo "median ratio troupe/nginx: $(median "${nginx_ratios[@]}")"
exit 0
