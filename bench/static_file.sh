#!/usr/bin/env bash
# bench/static_file.sh [ROUNDS] [SECONDS]: a 4 KiB static file at c64 (wrk -t2 -c64,
# keep-alive) from troupe's front (a [[static]] mount) and from nginx serving the
# same file, alternating in one run; prints each round and the median ratio
# troupe/nginx (issue 25's goal: ≥ 0.8). Both on one serving thread: troupe's one io
# thread (node.io_threads = 1, the default; a file wakes no actor) against one nginx
# worker (worker_processes 1), sendfile on, access log off.
# Needs nginx (Debian's nginx-light: apt-get install nginx-light).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}; secs=${2:-5}
command -v nginx > /dev/null || { echo "static_file: nginx is missing (apt-get install nginx-light)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$tmp"' EXIT  # nginx runs in the foreground: a job too
mkdir -p "$tmp/www"
head -c 4096 /dev/urandom > "$tmp/www/file.bin"
printf '[[static]]\nprefix = "/static/"\nroot = "%s/www"\n' "$tmp" > "$tmp/recipe.toml"
build/bin/troupe node --listen 127.0.0.1:0 --deposit "$tmp/deposit" --config "$tmp/recipe.toml" > "$tmp/troupe.out" 2> "$tmp/troupe.err" &
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$tmp/nginx.conf" <<CONF
daemon off;
user root;
worker_processes 1;
pid $tmp/nginx.pid;
error_log $tmp/nginx.err;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  client_body_temp_path $tmp; proxy_temp_path $tmp; fastcgi_temp_path $tmp; uwsgi_temp_path $tmp; scgi_temp_path $tmp;
  server { listen 127.0.0.1:$port; location /static/ { alias $tmp/www/; } }
}
CONF
nginx -c "$tmp/nginx.conf" -p "$tmp" &
for _ in $(seq 100); do grep -q listening "$tmp/troupe.out" 2>/dev/null && break; sleep 0.1; done
troupe=$(grep -o 'http://[0-9.:]*' "$tmp/troupe.out")
nginx_url="http://127.0.0.1:$port"
for _ in $(seq 100); do curl -sf "$nginx_url/static/file.bin" -o /dev/null && break; sleep 0.1; done
cmp <(curl -sf "$troupe/static/file.bin") "$tmp/www/file.bin"
cmp <(curl -sf "$nginx_url/static/file.bin") "$tmp/www/file.bin"
run() { wrk -t2 -c64 -d"${secs}s" "$1/static/file.bin" | awk '/Requests\/sec/ {print $2}'; }
ratios=()
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then n=$(run "$nginx_url"); t=$(run "$troupe"); else t=$(run "$troupe"); n=$(run "$nginx_url"); fi
  ratio=$(awk -v n="$n" -v t="$t" 'BEGIN {printf "%.3f", t / n}'); ratios+=("$ratio")
  echo "round $r: nginx $n req/s | troupe $t req/s | ratio $ratio"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "median ratio troupe/nginx:", a[int((NR+1)/2)]}'
