#!/usr/bin/env bash
# A troupe cluster on hosts of its own: Linux network namespaces joined by a
# bridge, addresses that exist only inside them (issue 28, docs/DEPLOY.md).
#
#   netns_cluster.sh up N [BINARY]  N member hosts (2-9) with TLS between members,
#                                  PostgreSQL on a host of its own, HAProxy in front
#                                  (dist/haproxy.cfg); waits until every member is
#                                  up and HAProxy serves
#   netns_cluster.sh down          removes everything it made (processes, namespaces, files)
#   netns_cluster.sh status        each member's process state and HAProxy's view
#
# Faults (a link is cut by taking its veth down: this kernel has no netem):
#   isolate K        cut host K off (every link of it)
#   split            the last (N-1)/2 hosts (a minority) on a bridge of their own
#   heal             every link up, every host back on one bridge
#   isolate-db       cut the database's host off
#   kill K | stop K | cont K      SIGKILL, SIGSTOP, SIGCONT member K
#   restart K [BINARY]            start member K again (after kill), joining a live member
#
# Addresses (10.77.0.0/24 by default, TROUPE_NETNS_SUBNET=10.X.Y): member K at
# .1K (HTTP :8080, cluster :7070), the database at .2, HAProxy at .3 (:8080),
# the client host at .4. Run a client with:
#   ip netns exec <prefix>-client curl http://10.77.0.3:8080/...
#
# Environment: TROUPE_NETNS_PREFIX (default "tr": namespaces tr-net, tr-h1…,
# tr-db, tr-lb, tr-client), TROUPE_NETNS_DIR (default /tmp/troupe-netns-PREFIX:
# certificates, logs, pids), TROUPE_NETNS_ARGS (more arguments for every member).
# Needs root, iproute2, openssl, haproxy, curl and the PostgreSQL server binaries.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${TROUPE_NETNS_PREFIX:-tr}
state=${TROUPE_NETNS_DIR:-/tmp/troupe-netns-$prefix}
subnet=${TROUPE_NETNS_SUBNET:-10.77.0}
net=$prefix-net
token_file=$state/admin.token

die() { echo "netns_cluster.sh: $*" >&2; exit 1; }
usage() { sed -n '2,27p' "$0" >&2; exit 2; }

host_ns() { echo "$prefix-h$1"; }
host_ip() { echo "$subnet.1$1"; }
db_ip=$subnet.2
lb_ip=$subnet.3
client_ip=$subnet.4

members() { cat "$state/members" 2>/dev/null || echo 0; }

# Whether member K's process runs (a zombie nobody reaped yet does not).
alive() {
  local pid
  pid=$(cat "$state/n$1.pid" 2>/dev/null) || return 1
  [[ -r "/proc/$pid/stat" ]] && [[ $(awk '{print $3}' "/proc/$pid/stat") != Z ]]
}

# A namespace on the bridge: its veth's far end is "v-<name>" in the bridge's namespace.
attach() {
  local ns=$1 name=$2 ip=$3
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$net" link add "v-$name" type veth peer name eth0 netns "$ns"
  ip -n "$net" link set "v-$name" master br0 up
  ip -n "$ns" addr add "$ip/24" dev eth0
  ip -n "$ns" link set eth0 up
}

# One CA for the cluster, a certificate per member (server and client: mutual TLS).
make_pki() {
  local n=$1 k pki=$state/pki
  mkdir -p "$pki"
  printf '[req]\ndistinguished_name=dn\n[dn]\n[v3]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n' \
    > "$pki/ca.cnf"
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout "$pki/ca.key" \
    -out "$pki/ca.pem" -days 7 -subj /CN=troupe-netns-ca -config "$pki/ca.cnf" -extensions v3 2>/dev/null
  for k in $(seq 1 "$n"); do
    printf 'subjectAltName=IP:%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n' \
      "$(host_ip "$k")" > "$pki/n$k.ext"
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout "$pki/n$k.key" \
      -out "$pki/n$k.csr" -subj "/CN=n$k" -config "$pki/ca.cnf" 2>/dev/null
    openssl x509 -req -in "$pki/n$k.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -set_serial "0x$k$RANDOM" \
      -days 7 -out "$pki/n$k.pem" -extfile "$pki/n$k.ext" 2>/dev/null
  done
  chmod 600 "$pki"/*.key
}

# Whether member K answers its health check (from the client host).
healthy() {
  ip netns exec "$prefix-client" curl -s -o /dev/null -w '%{http_code}' --max-time 2 \
    "http://$(host_ip "$1"):8080/_troupe/health" 2>/dev/null | grep -q '^200$'
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local until=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < until)) || die "$what did not happen within the time allowed (logs: $state)"
    sleep 0.2
  done
}

start_member() {
  local k=$1 bin=$2 join=()
  local n
  n=$(members)
  if [[ $k -ne 1 || -s "$state/started" ]]; then  # join any other live member
    local j
    for j in $(seq 1 "$n"); do
      if [[ $j -ne $k ]] && alive "$j"; then
        join=(--join "$(host_ip "$j"):7070")
        break
      fi
    done
  fi
  # The admin token and the deposit's URL (which may hold a password) come from
  # the environment, never the command line (/proc shows it to local users).
  # shellcheck disable=SC2086
  TROUPE_NODE_ADMIN_TOKEN=$(cat "$token_file") TROUPE_DEPOSIT_URL=$(cat "$state/pg.url") \
    ip netns exec "$(host_ns "$k")" "$bin" node --listen "$(host_ip "$k"):8080" \
    --set "node.name=n$k" --set "cluster.listen=$(host_ip "$k"):7070" "${join[@]}" \
    --set deposit.backend=postgres \
    --set "cluster.tls_cert=$state/pki/n$k.pem" --set "cluster.tls_key=$state/pki/n$k.key" \
    --set "cluster.tls_ca=$state/pki/ca.pem" ${TROUPE_NETNS_ARGS:-} \
    > "$state/n$k.out" 2>> "$state/n$k.log" < /dev/null &
  echo $! > "$state/n$k.pid"
  echo 1 > "$state/started"
  wait_for 30 "member n$k's start" healthy "$k"
}

write_haproxy_cfg() {
  local n=$1 k
  {
    sed -e "s/^  bind .*/  bind $lb_ip:8080/" -e '/^  server /d' "$root/dist/haproxy.cfg"
    for k in $(seq 1 "$n"); do
      echo "  server n$k $(host_ip "$k"):8080 check"
    done
  } > "$state/haproxy.cfg"
  haproxy -c -q -f "$state/haproxy.cfg" || die "haproxy rejects $state/haproxy.cfg"
}

haproxy_serves() {
  ip netns exec "$prefix-client" curl -s -o /dev/null -w '%{http_code}' --max-time 2 \
    "http://$lb_ip:8080/api/counter" 2>/dev/null | grep -q '^200$'
}

up() {
  local n=$1 bin=${2:-$root/build/bin/troupe}
  [[ $n =~ ^[2-9]$ ]] || die "up: 2 to 9 members"
  [[ -x "$bin" ]] || die "no troupe binary at $bin (build it first)"
  [[ $(id -u) -eq 0 ]] || die "needs root (ip netns)"
  for tool in ip openssl haproxy curl; do command -v "$tool" >/dev/null || die "needs $tool"; done
  ip netns list | grep -q "^$net\b" && die "$net exists already: run '$0 down' first"
  rm -rf "$state"
  mkdir -p "$state"
  chmod 755 "$state"  # the database's files below are the postgres user's
  echo "$n" > "$state/members"
  head -c 24 /dev/urandom | base64 | tr '+/' '-_' > "$token_file"
  chmod 600 "$token_file"
  ip netns add "$net"
  ip -n "$net" link set lo up
  ip -n "$net" link add br0 type bridge
  ip -n "$net" link set br0 up
  ip -n "$net" link add br1 type bridge  # the minority's side of a split
  ip -n "$net" link set br1 up
  local k
  for k in $(seq 1 "$n"); do
    attach "$(host_ns "$k")" "h$k" "$(host_ip "$k")"
  done
  attach "$prefix-db" db "$db_ip"
  attach "$prefix-lb" lb "$lb_ip"
  attach "$prefix-client" client "$client_ip"
  make_pki "$n"
  PG_LISTEN_ADDRESS=$db_ip ip netns exec "$prefix-db" "$root/scripts/pg_server.sh" start "$state/pg" > "$state/pg.url"
  chmod 600 "$state/pg.url"
  for k in $(seq 1 "$n"); do
    start_member "$k" "$bin"
  done
  write_haproxy_cfg "$n"
  ip netns exec "$prefix-lb" haproxy -D -f "$state/haproxy.cfg" -p "$state/haproxy.pid"
  wait_for 15 "HAProxy serving" haproxy_serves
  echo "up: $n members at $(host_ip 1)…$(host_ip "$n"), HAProxy at http://$lb_ip:8080 (ip netns exec $prefix-client …)"
}

down() {
  local k n pid
  n=$(members)
  if [[ -f "$state/haproxy.pid" ]]; then
    kill "$(cat "$state/haproxy.pid")" 2>/dev/null || true
  fi
  for k in $(seq 1 "$n"); do
    if [[ -f "$state/n$k.pid" ]]; then
      pid=$(cat "$state/n$k.pid")
      kill -CONT "$pid" 2>/dev/null || true
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  if [[ -d "$state/pg" ]]; then
    ip netns exec "$prefix-db" "$root/scripts/pg_server.sh" stop "$state/pg" 2>/dev/null ||
      "$root/scripts/pg_server.sh" stop "$state/pg" || true
  fi
  # Anything still running inside a namespace of ours goes with it.
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix-" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      kill -9 "$pid" 2>/dev/null || true
    done
    ip netns del "$ns"
  done
  rm -rf "$state"
}

set_link() { ip -n "$net" link set "v-$1" "$2"; }

status() {
  local k n pid
  n=$(members)
  for k in $(seq 1 "$n"); do
    if alive "$k"; then
      pid=$(cat "$state/n$k.pid")
      echo "n$k $(host_ip "$k") pid $pid $(awk '{print $3}' "/proc/$pid/stat") health $(healthy "$k" && echo 200 || echo no)"
    else
      echo "n$k $(host_ip "$k") not running"
    fi
  done
}

[[ $# -ge 1 ]] || usage
cmd=$1
shift
case "$cmd" in
  up) [[ $# -ge 1 ]] || usage; up "$@" ;;
  down) down ;;
  status) status ;;
  isolate) [[ $# -eq 1 ]] || usage; set_link "h$1" down ;;
  isolate-db) set_link db down ;;
  split)
    n=$(members)
    for k in $(seq $((n - (n - 1) / 2 + 1)) "$n"); do  # the last (N-1)/2 hosts
      ip -n "$net" link set "v-h$k" master br1
    done
    ;;
  heal)
    for dev in $(ip -n "$net" -o link show type veth | awk -F': ' '{print $2}' | cut -d@ -f1); do
      ip -n "$net" link set "$dev" master br0 up
    done
    ;;
  kill) [[ $# -eq 1 ]] || usage; kill -9 "$(cat "$state/n$1.pid")" ;;
  stop) [[ $# -eq 1 ]] || usage; kill -STOP "$(cat "$state/n$1.pid")" ;;
  cont) [[ $# -eq 1 ]] || usage; kill -CONT "$(cat "$state/n$1.pid")" ;;
  restart)
    [[ $# -ge 1 ]] || usage
    ! alive "$1" || die "member n$1 is running (kill it first)"
    start_member "$1" "${2:-$root/build/bin/troupe}"
    ;;
  *) usage ;;
esac
