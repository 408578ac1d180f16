#!/usr/bin/env bash
# ctest install.cart: troupe as an application author gets it.
#   install_test.sh BUILD_DIR SOURCE_DIR VERSION LIBDIR WS_PROBE
# Installs BUILD_DIR into a temporary prefix (`cmake --install --prefix`), checks
# what is there (the app API alone under include/troupe/, the CMake package, the
# pkg-config file, the binary), configures and builds examples/cart against that
# prefix only (find_package(troupe 0.2)), runs it on 127.0.0.1:0 with a fresh
# deposit, calls its routes over HTTP, freezes its user through the admin API,
# wakes him with his next request and checks his cart survived the round trip
# through the deposit; then a soft quit (SIGTERM, exit 0). Then examples/chat the
# same way: two users join a room, one socket each (WS_PROBE: a WebSocket from
# the command line), the listener is frozen and the speaker's line wakes him
# and reaches his open socket.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
version=$3
libdir=$4
ws_probe=$5

tmp=$(mktemp -d "${TMPDIR:-/tmp}/troupe-install.XXXXXX")
node_pid=""
cleanup() {
  [ -n "$node_pid" ] && kill -KILL "$node_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "install_test: FAIL: $*" >&2
  if [ -s "$tmp/node.err" ]; then
    echo "--- the node's stderr (last 30 lines):" >&2
    tail -n 30 "$tmp/node.err" >&2
  fi
  exit 1
}
say() { echo "install_test: $*"; }
# True while process $1 runs (a child that exited is a zombie until reaped: not running).
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# -- install ---------------------------------------------------------------------
p="$tmp/prefix"
cmake --install "$build" --prefix "$p" --strip > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
for f in bin/troupe include/troupe/troupe.hpp include/troupe/app.hpp include/troupe/codec.hpp \
         include/troupe/node_main.hpp include/troupe/version.hpp \
         "$libdir/cmake/troupe/troupeConfig.cmake" "$libdir/cmake/troupe/troupeConfigVersion.cmake" \
         "$libdir/cmake/troupe/troupeTargets.cmake" "$libdir/cmake/troupe/FindCAF.cmake" \
         "$libdir/pkgconfig/troupe.pc" "$libdir/libtroupe_transport.a" "$libdir/libtroupe_actors.a" \
         lib/systemd/system/troupe.service; do
  [ -e "$p/$f" ] || fail "cmake --install did not install $f"
done
# The public API only: include/ holds troupe/ and nothing of the internal modules.
[ "$(ls "$p/include")" = troupe ] || fail "include/ holds more than troupe/: $(ls "$p/include" | tr '\n' ' ')"
if grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$p"/include/troupe/*.hpp; then
  fail "an installed header includes a path of the source tree (above)"
fi
out=$("$p/bin/troupe" --version) || fail "troupe --version exited $?"
[ "$out" = "troupe $version" ] || fail "troupe --version printed [$out], not [troupe $version]"
say "installed into a temporary prefix: $(find "$p" -type f | wc -l) files, $(du -sh "$p" | cut -f1)"

# pkg-config finds it there too (relocatable .pc), and its include directory is the prefix's.
export PKG_CONFIG_PATH="$p/$libdir/pkgconfig"
pcv=$(pkg-config --modversion troupe) || fail "pkg-config does not find troupe.pc"
[ "$pcv" = "$version" ] || fail "pkg-config --modversion troupe: $pcv, not $version"
inc=$(pkg-config --cflags-only-I troupe | tr ' ' '\n' | sed -n 's/^-I//p' | head -n 1)
[ -f "$inc/troupe/troupe.hpp" ] || fail "pkg-config --cflags troupe names [$inc], not the prefix's include/"
pkg-config --libs troupe | grep -q -- "-ltroupe_transport" || fail "pkg-config --libs troupe: $(pkg-config --libs troupe)"

# -- examples/cart against the installed package --------------------------------
t0=$(now)
cmake -S "$src/examples/cart" -B "$tmp/cart" -G Ninja -DCMAKE_PREFIX_PATH="$p" > "$tmp/cart.configure.log" 2>&1 \
  || { cat "$tmp/cart.configure.log"; fail "configuring examples/cart against the prefix"; }
# Nothing of the source tree may leak into the application's build.
if grep -q -- "-I$src" "$tmp/cart/build.ninja"; then fail "the cart build includes from $src"; fi
t1=$(now)
cmake --build "$tmp/cart" > "$tmp/cart.build.log" 2>&1 || { cat "$tmp/cart.build.log"; fail "building examples/cart"; }
say "examples/cart: configured in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s, built in $(since "$t1") s" \
    "(one TU + link; $(du -h "$tmp/cart/cart" | cut -f1) binary)"

# The same through pkg-config: its flags compile cart.cpp, its libraries link the object.
t2=$(now)
# shellcheck disable=SC2046  # pkg-config's output is a list of flags
g++ -std=c++17 -fsyntax-only $(pkg-config --cflags troupe) "$src/examples/cart/cart.cpp" \
  || fail "cart.cpp does not compile with pkg-config --cflags troupe"
obj=$(find "$tmp/cart" -name 'cart.cpp.o' | head -n 1)
[ -n "$obj" ] || fail "no cart.cpp.o in the cart build"
# shellcheck disable=SC2046
g++ -o "$tmp/cart-pc" "$obj" $(pkg-config --libs troupe) || fail "cart does not link with pkg-config --libs troupe"
out=$("$tmp/cart-pc" --version) || fail "the pkg-config-linked cart --version exited $?"
[ "$out" = "troupe $version" ] || fail "the pkg-config-linked cart --version printed [$out]"
say "pkg-config: compiled and linked in $(since "$t2") s"

# -- run it ------------------------------------------------------------------------
token="install-test-$RANDOM$RANDOM"
# start_node BINARY APP: a node of BINARY serving user type APP on 127.0.0.1:$port, a fresh deposit.
start_node() {
  rm -rf "$tmp/deposit"
  "$1" node --listen 127.0.0.1:0 --deposit "$tmp/deposit" --app "$2" --admin-token "$token" \
    > "$tmp/node.out" 2> "$tmp/node.err" &
  node_pid=$!
  port=""
  local deadline=$((SECONDS + 30))
  while [ -z "$port" ]; do
    port=$(sed -n 's|^troupe node listening on http://127\.0\.0\.1:\([0-9][0-9]*\)$|\1|p' "$tmp/node.out")
    [ -n "$port" ] && break
    running "$node_pid" || fail "the $2 node exited before its ready line"
    [ "$SECONDS" -lt "$deadline" ] || fail "no ready line within 30 s"
    sleep 0.05
  done
  base="http://127.0.0.1:$port"
}
# stop_node: a soft quit (SIGTERM), which ends with exit 0 (everything in the deposit).
stop_node() {
  kill -TERM "$node_pid"
  local deadline=$((SECONDS + 30))
  while running "$node_pid"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "the node did not stop within 30 s of SIGTERM"
    sleep 0.05
  done
  local rc=0
  wait "$node_pid" || rc=$?
  node_pid=""
  expect "the node's exit code after SIGTERM" "$rc" 0
}
start_node "$tmp/cart/cart" cart
jar="$tmp/jar"
# call METHOD PATH [BODY] → "STATUS BODY" (with the cookies of $jar)
call() {
  local args=(-sS -o "$tmp/body" -w '%{http_code}' -c "$jar" -b "$jar" -X "$1" "$base$2")
  [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data "$3")
  local code
  code=$(curl "${args[@]}") || fail "curl $1 $2"
  echo "$code $(cat "$tmp/body")"
}
admin() {
  curl -sS -H "Authorization: Bearer $token" -X "$1" "$base$2" || fail "curl $1 $2 (admin)"
}
expect() {  # expect WHAT GOT WANTED
  [ "$2" = "$3" ] || fail "$1: got [$2], wanted [$3]"
}

got=$(call GET /cart)
[[ "$got" =~ ^200\ \{\"items\":\{\},\"user\":\"guest_ ]] || fail "GET /cart as a guest: [$got]"
got=$(call POST /login '{"user":"ann"}')
[[ "$got" == 200\ * ]] || fail "POST /login: [$got]"
expect "add 2 apples" "$(call POST /cart/apple '{"count":2}')" '200 {"items":{"apple":2},"user":"ann"}'
expect "add a pear" "$(call POST /cart/pear)" '200 {"items":{"apple":2,"pear":1},"user":"ann"}'
expect "a bad count" "$(call POST /cart/pear '{"count":0}')" '400 {"error":"count: an integer from 1 to 1000"}'
expect "clear" "$(call DELETE /cart)" '200 {"items":{},"user":"ann"}'
expect "add 3 plums" "$(call POST /cart/plum '{"count":3}')" '200 {"items":{"plum":3},"user":"ann"}'

# Freeze ann (admin API): her cart goes to the deposit and her actor stops.
wakes_before=$(admin GET /_troupe/metrics | sed -n 's/^troupe_user_wakes_total \([0-9]*\)$/\1/p')
[ -n "$wakes_before" ] || fail "no troupe_user_wakes_total in /_troupe/metrics"
expect "freeze ann" "$(admin POST /_troupe/users/ann/freeze)" '{"frozen":"ann"}'
[ -n "$(find "$tmp/deposit/users" -name 'ann.parcel' -size +0 2>/dev/null)" ] || fail "no parcel of ann in the deposit"
# Her next request wakes her from the parcel: the cart is what it was.
expect "ann's cart after the wake" "$(call GET /cart)" '200 {"items":{"plum":3},"user":"ann"}'
wakes_after=$(admin GET /_troupe/metrics | sed -n 's/^troupe_user_wakes_total \([0-9]*\)$/\1/p')
expect "troupe_user_wakes_total" "$wakes_after" "$((wakes_before + 1))"
expect "add a plum after the wake" "$(call POST /cart/plum)" '200 {"items":{"plum":4},"user":"ann"}'

# A soft quit ends it with exit 0 (everything in the deposit).
stop_node
say "ok: cart: routes, freeze, wake, soft quit"

# -- examples/chat: app WebSockets, rooms as messages between users ----------------------
t0=$(now)
cmake -S "$src/examples/chat" -B "$tmp/chat" -G Ninja -DCMAKE_PREFIX_PATH="$p" > "$tmp/chat.configure.log" 2>&1 \
  || { cat "$tmp/chat.configure.log"; fail "configuring examples/chat against the prefix"; }
cmake --build "$tmp/chat" > "$tmp/chat.build.log" 2>&1 || { cat "$tmp/chat.build.log"; fail "building examples/chat"; }
say "examples/chat: configured and built in $(since "$t0") s"
start_node "$tmp/chat/chat" chat
got=$(curl -sS "$base/") || fail "GET / of chat"
[[ "$got" == *"new WebSocket("* ]] || fail "GET / is not the chat page"
jar="$tmp/ann.jar"
expect "ann logs in" "$(call POST /login '{"user":"ann"}' | cut -c1-3)" 200
expect "ann joins" "$(call POST /rooms/lobby/join)" '200 {"members":["ann"],"room":"lobby"}'
ann=$(awk '$6 == "troupe_cid" { print "troupe_cid=" $7 }' "$jar")
jar="$tmp/bob.jar"
expect "bob logs in" "$(call POST /login '{"user":"bob"}' | cut -c1-3)" 200
expect "a bad room name" "$(call POST /rooms/Lobby!/join | cut -c1-3)" 400
expect "bob joins" "$(call POST /rooms/lobby/join)" '200 {"members":["ann","bob"],"room":"lobby"}'
bob=$(awk '$6 == "troupe_cid" { print "troupe_cid=" $7 }' "$jar")
jar="$tmp/ann.jar"
deadline=$((SECONDS + 20))
until [[ "$(call GET /rooms)" == *'"lobby":["ann","bob"]'* ]]; do  # bob's join is a message to ann
  [ "$SECONDS" -lt "$deadline" ] || fail "ann never learnt that bob joined: $(call GET /rooms)"
  sleep 0.05
done
jar="$tmp/bob.jar"
expect "the socket route without an upgrade" "$(call GET /rooms/lobby/socket | cut -c1-3)" 426
# Bob's page listens; an operator freezes him with it open.
"$ws_probe" --port "$port" --target /rooms/lobby/socket --cookie "$bob" --protocol chat.v1 --read 1 \
  --timeout-ms 20000 > "$tmp/bob.ws" 2>&1 &
bob_ws=$!
deadline=$((SECONDS + 20))
until grep -q '^open$' "$tmp/bob.ws"; do
  running "$bob_ws" || fail "bob's socket: $(cat "$tmp/bob.ws")"
  [ "$SECONDS" -lt "$deadline" ] || fail "bob's socket did not open"
  sleep 0.05
done
expect "freeze bob" "$(admin POST /_troupe/users/bob/freeze)" '{"frozen":"bob"}'
# Ann says hello over her socket: told to bob, he wakes, his open socket hears it.
said=$("$ws_probe" --port "$port" --target /rooms/lobby/socket --cookie "$ann" --protocol chat.v1 \
  --send "hello bob" --read 1) || fail "ann's socket: $said"
expect "ann hears herself" "$said" "$(printf 'open\n{"from":"ann","room":"lobby","text":"hello bob"}')"
wait "$bob_ws" || fail "bob's socket heard nothing: $(cat "$tmp/bob.ws")"
expect "bob's socket hears ann" "$(cat "$tmp/bob.ws")" "$(printf 'open\n{"from":"ann","room":"lobby","text":"hello bob"}')"
expect "a socket before joining" "$("$ws_probe" --port "$port" --target /rooms/other/socket --cookie "$bob" \
  --protocol chat.v1 | grep -o "status 403" || true)" "status 403"
stop_node
say "ok: chat: rooms, app WebSockets, a frozen listener woken by a line"
