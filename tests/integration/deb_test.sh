#!/usr/bin/env bash
# ctest install.deb: the Debian packages made by `cpack -G DEB` from BUILD_DIR.
#   deb_test.sh BUILD_DIR VERSION
# Builds them into a temporary directory (nothing is installed on the system),
# checks their control data (dpkg-deb -I) and contents (dpkg-deb -c), and runs
# the packaged binary, unpacked (dpkg-deb -x), with --version.
set -euo pipefail
build=$(cd "$1" && pwd)
version=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/troupe-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }
say() { echo "deb_test: $*"; }

t0=$SECONDS
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" > "$tmp/cpack.log" 2>&1 \
  || { cat "$tmp/cpack.log"; fail "cpack -G DEB"; }
arch=$(dpkg --print-architecture)
node="$tmp/pkg/troupe_${version}_${arch}.deb"
dev="$tmp/pkg/troupe-dev_${version}_${arch}.deb"
[ -f "$node" ] && [ -f "$dev" ] || fail "cpack made: $(ls "$tmp/pkg"/*.deb 2>/dev/null | xargs -n1 basename | tr '\n' ' ')"
say "cpack -G DEB in $((SECONDS - t0)) s: $(basename "$node") $(du -h "$node" | cut -f1), $(basename "$dev") $(du -h "$dev" | cut -f1)"

# control: name, version, architecture; the node's Depends computed from its shared libraries.
field() { dpkg-deb -f "$1" "$2"; }
[ "$(field "$node" Package)" = troupe ] || fail "Package: $(field "$node" Package)"
[ "$(field "$dev" Package)" = troupe-dev ] || fail "Package: $(field "$dev" Package)"
for d in "$node" "$dev"; do
  [ "$(field "$d" Version)" = "$version" ] || fail "$(basename "$d"): Version $(field "$d" Version)"
  [ "$(field "$d" Architecture)" = "$arch" ] || fail "$(basename "$d"): Architecture $(field "$d" Architecture)"
done
depends=$(field "$node" Depends)
for lib in libc6 libstdc++6 libcaf-core libcaf-io libcaf-openssl libspdlog libssl libpq5; do
  [[ "$depends" == *"$lib"* ]] || fail "troupe's Depends lacks $lib: $depends"
done
dev_depends=$(field "$dev" Depends)
for pkg in libcaf-dev libmsgpack-cxx-dev nlohmann-json3-dev libspdlog-dev; do
  [[ "$dev_depends" == *"$pkg"* ]] || fail "troupe-dev's Depends lacks $pkg: $dev_depends"
done
dpkg-deb -I "$node" > "$tmp/node.info" || fail "dpkg-deb -I $(basename "$node")"
grep -q "^ Description: " "$tmp/node.info" || fail "no Description in $(basename "$node"): $(cat "$tmp/node.info")"

# contents
dpkg-deb -c "$node" | awk '{print $NF}' > "$tmp/node.list"
dpkg-deb -c "$dev" | awk '{print $NF}' > "$tmp/dev.list"
has() { grep -qx "$2" "$1" || fail "$(basename "$1" .list) package lacks $2"; }
has "$tmp/node.list" ./usr/bin/troupe
has "$tmp/node.list" ./usr/lib/systemd/system/troupe.service
has "$tmp/node.list" ./usr/share/doc/troupe/install.md
for f in include/troupe/troupe.hpp include/troupe/app.hpp include/troupe/codec.hpp include/troupe/node_main.hpp \
         include/troupe/version.hpp lib/libtroupe_transport.a lib/libtroupe_actors.a lib/cmake/troupe/troupeConfig.cmake \
         lib/cmake/troupe/troupeConfigVersion.cmake lib/cmake/troupe/FindCAF.cmake lib/pkgconfig/troupe.pc; do
  has "$tmp/dev.list" "./usr/$f"
done
if grep -E '^\./usr/include/' "$tmp/dev.list" | grep -vE '^\./usr/include/(troupe/.*)?$'; then
  fail "troupe-dev installs headers outside /usr/include/troupe/ (above)"
fi
if grep -q '^\./usr/include/\|^\./usr/lib/.*\.a$' "$tmp/node.list"; then fail "the node package carries development files"; fi
if grep -q '^\./usr/bin/' "$tmp/dev.list"; then fail "troupe-dev carries binaries"; fi

# the packaged binary runs
dpkg-deb -x "$node" "$tmp/root"
out=$("$tmp/root/usr/bin/troupe" --version) || fail "the packaged troupe --version exited $?"
[ "$out" = "troupe $version" ] || fail "the packaged troupe --version printed [$out]"
say "ok: troupe $(wc -l < "$tmp/node.list") entries (binary $(du -h "$tmp/root/usr/bin/troupe" | cut -f1)), troupe-dev $(wc -l < "$tmp/dev.list") entries; Depends: $depends"
