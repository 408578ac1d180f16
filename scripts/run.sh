#!/usr/bin/env bash
# The run command: set up, build, and start a node serving the notes sample on
# http://127.0.0.1:8080 (extra arguments go to `troupe node`). Unless an admin
# token is given (--admin-token, --set node.admin_token=…, TROUPE_NODE_ADMIN_TOKEN,
# or a --config recipe that sets admin_token), one is generated for this run and
# the console's URL is printed with it, ready to open.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

listen=127.0.0.1:8080
token="${TROUPE_NODE_ADMIN_TOKEN:-}"
given=$([ -n "$token" ] && echo yes || echo no)
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --admin-token) given=yes; token="${args[i+1]:-}" ;;
    --admin-token=*) given=yes; token="${args[i]#--admin-token=}" ;;
    node.admin_token=*) given=yes; token="${args[i]#node.admin_token=}" ;;
    --listen) listen="${args[i+1]:-$listen}" ;;
    --config) grep -Eq '^[[:space:]]*admin_token[[:space:]]*=' "${args[i+1]:-/dev/null}" 2>/dev/null && given=yes ;;
  esac
done
extra=()
if [ "$given" = no ]; then
  token=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
  extra=(--admin-token "$token")
fi
if [ -n "$token" ]; then
  echo "troupe: console at http://${listen}/_troupe/console#token=${token}"
else
  echo "troupe: console at http://${listen}/_troupe/console (the recipe's admin token)"
fi
exec ./build/bin/troupe node --listen "$listen" --deposit ./deposit --app notes "${extra[@]}" "$@"
