#!/usr/bin/env bash
# A cluster on hosts of its own under HAProxy (issue 28, first step;
# scripts/netns_cluster.sh): three members in network namespaces with TLS
# between them, PostgreSQL on a host of its own, HAProxy in front, a client
# host. Through HAProxy: a user's acknowledged increments survive his host
# cut off (he is served elsewhere with all of them), the cut-off member leaves
# HAProxy's pool and rejoins when healed, a minority split off fences itself
# while the majority serves, a killed member restarts and rejoins, and `down`
# leaves nothing behind. Skipped (77) without root, ip netns, haproxy or the
# PostgreSQL server.
#   netns_cluster_test.sh SOURCE_DIR TROUPE_BINARY
set -uo pipefail
src=$1
bin=$2
export TROUPE_NETNS_PREFIX=trtest TROUPE_NETNS_SUBNET=10.78.0
export TROUPE_NETNS_DIR=/tmp/troupe-netns-test-$$
export TROUPE_NETNS_ARGS="--set group.default.durability=reply"
script=$src/scripts/netns_cluster.sh
lb=http://10.78.0.3:8080

skip() { echo "SKIPPED: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (ip netns)"
for tool in ip haproxy openssl curl; do command -v "$tool" >/dev/null || skip "no $tool"; done
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || skip "no PostgreSQL server binaries"
ip netns add trtest-probe 2>/dev/null || skip "ip netns add is not permitted here"
ip netns del trtest-probe

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
show_logs() {
  local f
  for f in "$TROUPE_NETNS_DIR"/n*.log; do
    [[ -f "$f" ]] && { echo "---- $f"; tail -n 15 "$f"; }
  done
}
cleanup() { "$script" down >/dev/null 2>&1; }
trap cleanup EXIT

client() { ip netns exec trtest-client curl -s -m 3 "$@"; }
jar=$(mktemp)
count() { client -b "$jar" -c "$jar" "$lb/api/counter" | sed -n 's/.*"count":\([0-9]*\).*/\1/p'; }
home() { client -b "$jar" "$lb/api/whoami" | sed -n 's/.*"node":"n\([0-9]\)".*/\1/p'; }
all_healthy() { [[ $("$script" status | grep -c 'health 200') == 3 ]]; }
# Increments acknowledged (200) and tried: the count read back must lie between them.
acked=0
tried=0
increment() {
  local code
  code=$(client -o /dev/null -w '%{http_code}' -b "$jar" -c "$jar" -X POST "$lb/api/counter/incr")
  tried=$((tried + 1))
  [[ $code == 200 ]] && acked=$((acked + 1))
  [[ $code == 200 ]]
}
nothing_lost() {
  local c
  c=$(count)
  [[ -n "$c" ]] && ((c >= acked && c <= tried))
}
# until SECONDS COMMAND...: polls (5 a second) until COMMAND succeeds.
until_ok() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < end)) || return 1
    sleep 0.2
  done
}

"$script" up 3 "$bin" || { fail "up 3"; exit 1; }
[[ $(ip netns list | grep -c '^trtest-') -eq 7 ]] || fail "seven namespaces: the bridge's, three hosts, db, lb, client"
! ip -o addr show | grep -q '10\.78\.0\.' || fail "an address of the namespaces is visible outside them"

for _ in 1 2 3 4 5; do
  increment || fail "an increment through HAProxy"
done
[[ $(count) == 5 ]] || fail "five increments through HAProxy read back 5 (got $(count))"
[[ -n "$(home)" ]] || fail "whoami names his member"

# A minority split off fences itself; the majority serves through HAProxy.
"$script" split
n3_fenced() { ! ip netns exec trtest-h3 curl -s -o /dev/null -w '%{http_code}' -m 2 http://10.78.0.13:8080/_troupe/health | grep -q 200; }
until_ok 20 n3_fenced || fail "split: n3 (the minority) kept answering 200 on its health"
until_ok 20 nothing_lost || fail "split: the majority did not serve the user his $acked"
"$script" heal
until_ok 40 all_healthy || fail "healed after the split"

# His host cut off: he is served elsewhere, nothing acknowledged lost.
was=$(home)
"$script" isolate "$was"
started=$SECONDS
served_elsewhere() { nothing_lost && [[ $(home) != "$was" ]]; }
until_ok 20 served_elsewhere || fail "n$was cut off: the user was not served elsewhere with his $acked increments"
echo "n$was cut off: served elsewhere after about $((SECONDS - started)) s"
until_ok 20 increment || fail "an increment after the cut"
nothing_lost || fail "after the cut: $(count) read back, $acked acknowledged of $tried"
"$script" heal
until_ok 40 all_healthy || fail "healed: n$was did not rejoin ($("$script" status | tr '\n' ';'))"

# kill -9 and a restart: it rejoins.
"$script" kill 2
until_ok 20 nothing_lost || fail "n2 killed: the user was not served his $acked increments"
"$script" restart 2 "$bin" || fail "restart 2"
until_ok 40 all_healthy || fail "n2 restarted did not rejoin"

((failures)) && show_logs
"$script" down
[[ $(ip netns list | grep -c '^trtest-') -eq 0 ]] || fail "down left namespaces behind"
[[ ! -e "$TROUPE_NETNS_DIR" ]] || fail "down left $TROUPE_NETNS_DIR behind"
rm -f "$jar"
if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "netns cluster: all checks passed"
