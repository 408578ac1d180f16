#!/usr/bin/env bash
# The run command: set up, build the node binary (only it: setup.sh without
# --tests), and start a node serving the notes sample. Every argument goes to
# `troupe node` as it is; run.sh adds its defaults only for what they do not
# set (by flag, --set KEY=…, TROUPE_* variable or the --config recipe):
#   --listen 127.0.0.1:8080   (node.listen)
#   --deposit ./deposit       (deposit.path)
#   --app notes               (group.default.user_type; any user_type in the recipe counts)
#   --config samples/notes/notes.toml  (with --app notes and no --config: the page at /)
# Unless an admin token is given (--admin-token, --set node.admin_token=…,
# TROUPE_NODE_ADMIN_TOKEN, or a --config recipe that sets admin_token), one is
# generated for this run. Once the node listens, the console's URL is printed
# for the address it really listens on (e.g. --listen 127.0.0.1:0: the port
# it got), ready to open.
# TROUPE_BIN=PATH runs that binary instead, without setting up or building.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${TROUPE_BIN:-}"
if [ -z "$bin" ]; then
  ./scripts/setup.sh
  bin=./build/bin/troupe
fi

args=("$@")
config=""
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --config) config="${args[i+1]:-}" ;;
    --config=*) config="${args[i]#--config=}" ;;
  esac
done

# True when the recipe file `config` sets KEY in [SECTION] (a TOML key = value
# line under that table; SECTION "*" is any table).
recipe_sets() {
  [ -n "$config" ] && [ -r "$config" ] || return 1
  awk -v want="$1" -v key="$2" '
    /^[[:space:]]*\[/ { section = $0; gsub(/[][[:space:]]/, "", section); next }
    $0 ~ "^[[:space:]]*" key "[[:space:]]*=" && (want == "*" || section == want) { found = 1 }
    END { exit found ? 0 : 1 }' "$config"
}

# True when the arguments, the environment or the recipe file set recipe key
# SECTION.KEY, given as flag FLAG too ("" when it has none).
given() {
  local section=$1 key=$2 flag=$3 env_name a
  env_name="TROUPE_$(tr '[:lower:].' '[:upper:]_' <<<"$section.$key")"
  [ -n "${!env_name:-}" ] && return 0
  for a in "${args[@]}"; do
    [ -n "$flag" ] && { [ "$a" = "$flag" ] || [[ "$a" == "$flag="* ]]; } && return 0
    [[ "$a" == "$section.$key="* ]] && return 0
  done
  recipe_sets "$section" "$key"
}

defaults=()
given node listen --listen || defaults+=(--listen 127.0.0.1:8080)
given deposit path --deposit || defaults+=(--deposit ./deposit)
if ! given group.default user_type --app && ! recipe_sets "*" user_type; then
  defaults+=(--app notes)
  # The notes sample's page and files (its [[static]] mounts), unless a recipe is given.
  [ -n "$config" ] || defaults+=(--config samples/notes/notes.toml)
fi

token="${TROUPE_NODE_ADMIN_TOKEN:-}"
token_known=$([ -n "$token" ] && echo yes || echo no)
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --admin-token) token="${args[i+1]:-}"; token_known=yes ;;
    --admin-token=*) token="${args[i]#--admin-token=}"; token_known=yes ;;
    node.admin_token=*) token="${args[i]#node.admin_token=}"; token_known=yes ;;
  esac
done
if [ "$token_known" = no ] && recipe_sets node admin_token; then
  token_known=recipe
fi
if [ "$token_known" = no ]; then
  token=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
  defaults+=(--admin-token "$token")
fi

# The node prints one ready line on stdout, "troupe node listening on
# http(s)://HOST:PORT[ and http://HOST:PORT]"; the console URL is made from it.
# This reader survives Ctrl-C (the node's soft quit still writes to it) and ends
# with the node's stdout.
console_url() {
  trap '' INT TERM HUP
  local line url
  while IFS= read -r line; do
    printf '%s\n' "$line"
    case "$line" in
      "troupe node listening on "*)
        url=${line#troupe node listening on }
        url=${url%% *}
        url=${url/:\/\/0.0.0.0:/://127.0.0.1:}  # a wildcard address: open it on loopback
        url=${url/:\/\/\[::\]:/://[::1]:}
        if [ "$token_known" = recipe ]; then
          printf 'troupe: console at %s/_troupe/console (the recipe'"'"'s admin token)\n' "$url"
        else
          printf 'troupe: console at %s/_troupe/console#token=%s\n' "$url" "$token"
        fi
        ;;
    esac
  done
}

# exec: the node is this process (its pid, its signals, its exit code).
exec "$bin" node "${defaults[@]}" "$@" > >(console_url)
