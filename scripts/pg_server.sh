#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests (no system service needed).
#
#   scripts/pg_server.sh start DIR   initdb into DIR/data, start it on a free TCP
#                                    port of 127.0.0.1 and a unix socket in DIR,
#                                    trust authentication, create troupe_test;
#                                    prints ONE line: its URL
#                                    postgresql://USER@127.0.0.1:PORT/troupe_test
#   scripts/pg_server.sh stop DIR    stops it (fast) and removes DIR
#
# PG_LISTEN_ADDRESS (default 127.0.0.1): the address it listens on and its URL
# names; another one (a test host's, scripts/netns_cluster.sh) also trusts the
# clients of that address's subnet (pg_hba "samenet").
#
# The server runs as an unprivileged user: the caller, or — when run as root —
# Debian's `postgres` system user (DIR is chowned to it, so DIR must be
# reachable by that user: /tmp/... is). Binaries: the newest
# /usr/lib/postgresql/*/bin. Server log: DIR/server.log.
set -euo pipefail

usage() {
  echo "usage: $0 start|stop DIR" >&2
  exit 2
}
[[ $# -eq 2 ]] || usage
action=$1
dir=$2

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
  echo "pg_server.sh: no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (apt-get install postgresql)" >&2
  exit 1
fi

# Runs a command as the server's user.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

address=${PG_LISTEN_ADDRESS:-127.0.0.1}

port_is_free() {
  ! (exec 3<>"/dev/tcp/$address/$1") 2>/dev/null
}

case "$action" in
start)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [[ -e "$dir/data" ]]; then
    echo "pg_server.sh: $dir/data exists already (stop it first: $0 stop $dir)" >&2
    exit 1
  fi
  if [[ ${#dir} -gt 90 ]]; then  # the unix socket's path must fit in sun_path (107 bytes)
    echo "pg_server.sh: $dir is too long a path for the server's unix socket; use a shorter one" >&2
    exit 1
  fi
  if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || { echo "pg_server.sh: run as root but there is no 'postgres' user" >&2; exit 1; }
    chown postgres: "$dir"
    chmod 0700 "$dir"
    if ! runuser -u postgres -- test -w "$dir"; then
      echo "pg_server.sh: the postgres user cannot reach $dir (a parent directory is closed to it); use e.g. /tmp/..." >&2
      exit 1
    fi
    user=postgres
  else
    user=$(id -un)
  fi
  if ! as_owner "$bin/initdb" -D "$dir/data" --auth=trust --encoding=UTF8 --locale=C.UTF-8 -U "$user" \
      >"$dir/initdb.log" 2>&1; then
    echo "pg_server.sh: initdb failed (see $dir/initdb.log):" >&2
    tail -n 5 "$dir/initdb.log" >&2
    exit 1
  fi
  if [[ "$address" != 127.0.0.1 ]]; then
    echo "host all all samenet trust" >> "$dir/data/pg_hba.conf"
  fi
  started=
  for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 40000))
    port_is_free "$port" || continue
    if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
        -o "-c listen_addresses=$address -c port=$port -c unix_socket_directories=$dir" start >/dev/null 2>&1; then
      started=1
      break
    fi
  done
  if [[ -z "$started" ]]; then
    echo "pg_server.sh: the server did not start (see $dir/server.log):" >&2
    tail -n 5 "$dir/server.log" >&2 || true
    exit 1
  fi
  if ! as_owner "$bin/psql" -h "$dir" -p "$port" -U "$user" -d postgres -qAt -v ON_ERROR_STOP=1 \
      -c "CREATE DATABASE troupe_test" >/dev/null 2>"$dir/createdb.log"; then
    echo "pg_server.sh: cannot create troupe_test (see $dir/createdb.log)" >&2
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    exit 1
  fi
  echo "postgresql://$user@$address:$port/troupe_test"
  ;;
stop)
  [[ -d "$dir" ]] || exit 0
  if [[ -f "$dir/data/postmaster.pid" ]]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
  fi
  rm -rf "$dir"
  ;;
*)
  usage
  ;;
esac
