#!/usr/bin/env bash
# bench/tls_s1.sh [ROUNDS] [SECONDS] [troupe node flags...]: TLS S1 against plain
# (issue 14). One troupe node serves HTTPS on node.listen and plain HTTP on
# node.plain_listen; sticky GET /api/counter over the same 1,000 users
# (wrk -t2 -c64, keep-alive) goes to each in turn, alternating in one run; prints
# each round and the median ratio https/plain. The certificate is an ECDSA P-256
# one made here by the openssl CLI. wrk's handshakes happen once per connection
# (keep-alive): this measures TLS record encryption, not handshakes.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; secs=${2:-5}; shift 2 || true
bin=build/bin
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout "$tmp/key.pem" \
  -out "$tmp/cert.pem" -days 2 -subj /CN=troupe-bench -addext subjectAltName=IP:127.0.0.1 2> /dev/null
"$bin/troupe" node --listen 127.0.0.1:0 --deposit "$tmp/deposit" --set "node.tls_cert=$tmp/cert.pem" \
  --set "node.tls_key=$tmp/key.pem" --set node.plain_listen=127.0.0.1:0 "$@" > "$tmp/troupe.out" 2> "$tmp/troupe.err" &
for _ in $(seq 100); do grep -q listening "$tmp/troupe.out" 2>/dev/null && break; sleep 0.1; done
tls_url=$(grep -o 'https://[0-9.:]*' "$tmp/troupe.out")
plain_url=$(grep -o ' http://[0-9.:]*' "$tmp/troupe.out" | tr -d ' ')
[ -n "$tls_url" ] && [ -n "$plain_url" ] || { cat "$tmp/troupe.out" "$tmp/troupe.err"; exit 1; }
bench/cookies.sh "$plain_url" 1000 "$tmp/cookies.txt"  # the same users on both listeners
run() { COOKIES="$tmp/cookies.txt" wrk -t2 -c64 -d"${secs}s" --latency -s bench/sticky.lua "$1/api/counter" \
          | awk '/Requests\/sec/ {rps=$2} / 99%/ {p99=$2} /Non-2xx/ {bad=$4} /Socket errors/ {err=$0} END {print rps, p99, bad+0}'; }
ratios=()
for ((r = 1; r <= rounds; r++)); do
  read -r p pp99 pbad < <(run "$plain_url")
  read -r t tp99 tbad < <(run "$tls_url")
  ratio=$(awk -v t="$t" -v p="$p" 'BEGIN {printf "%.3f", t / p}')
  ratios+=("$ratio")
  echo "round $r: plain $p req/s (p99 $pp99, non-2xx $pbad) | https $t req/s (p99 $tp99, non-2xx $tbad) | ratio $ratio"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "median ratio https/plain:", a[int((NR+1)/2)]}'
