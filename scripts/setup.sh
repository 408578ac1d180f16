#!/usr/bin/env bash
# Installs the Debian packages troupe needs (only the missing ones), then
# configures build/ and builds into it. Used by run.sh and test.sh.
#   setup.sh          the node binary only (`--target troupe`): what run.sh runs. A
#                     build/ configured here the first time has the tests and the
#                     benchmarks off (TROUPE_BUILD_TESTS, TROUPE_BUILD_BENCH; no GoogleTest);
#                     one test.sh configured keeps them (they are just not built).
#   setup.sh --tests  everything, tests and benchmarks on; also installs what the tests
#                     need (libgtest-dev before the build, the rest while it runs; chromium: the console's
#                     end-to-end test; wrk: the benchmark harness's smoke run; clang and
#                     libclang-rt-14-dev, its libFuzzer and sanitizer runtimes: the fuzz
#                     targets; postgresql: a throwaway server for the PostgreSQL deposit's
#                     tests, never a system service; openssl: the CLI the TLS tests make
#                     their certificates with; curl: the installed-package test; dpkg-dev:
#                     dpkg-shlibdeps for the Debian package's test; haproxy and
#                     iproute2: the cluster on network namespaces under a balancer,
#                     scripts/netns_cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build ccache pkg-config
          libcaf-dev libboost-dev libssl-dev libmsgpack-cxx-dev libspdlog-dev
          libtoml11-dev nlohmann-json3-dev libcli11-dev libpq-dev)
# What only the tests run (not what they build with): installed while the
# build runs, since apt waits mostly on the network and the disk (chromium
# alone is about a minute on a fresh machine), the build on the CPU.
tools=()
tests=no
if [ "${1:-}" = "--tests" ]; then
  tests=yes
  packages+=(libgtest-dev)
  tools=(chromium wrk clang libclang-rt-14-dev postgresql openssl curl dpkg-dev haproxy iproute2)
fi
missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(missing_of "${packages[@]}")
mapfile -t missing_tools < <(missing_of "${tools[@]}")
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
install() {
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@"
}
if ((${#missing[@]} + ${#missing_tools[@]})); then
  $sudo apt-get update -qq
fi
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  install "${missing[@]}"
fi
tools_install=""
if ((${#missing_tools[@]})); then
  echo "setup: installing ${missing_tools[*]} while the build runs (log: build-tools.log)"
  install "${missing_tools[@]}" > build-tools.log 2>&1 &
  tools_install=$!
fi
# Never leaves apt running behind it (a failed build still waits for it).
trap '[ -z "$tools_install" ] || wait "$tools_install" || true' EXIT

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# The precompiled headers (cmake/troupe_module.cmake) are cached only with these.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
options=()
if [ "$tests" = yes ]; then
  options=(-DTROUPE_BUILD_TESTS=ON -DTROUPE_BUILD_BENCH=ON)
elif [ ! -f build/CMakeCache.txt ]; then
  options=(-DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCH=OFF)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${options[@]}" > build.configure.log 2>&1 \
  || { cat build.configure.log; exit 1; }
rm -f build.configure.log
if [ "$tests" = yes ]; then
  cmake --build build -j "$(nproc)"
else
  cmake --build build -j "$(nproc)" --target troupe
fi
if [ -n "$tools_install" ]; then
  status=0
  wait "$tools_install" || status=$?
  tools_install=""
  if [ "$status" -ne 0 ]; then
    cat build-tools.log
    echo "setup: installing ${missing_tools[*]} failed" >&2
    exit 1
  fi
  rm -f build-tools.log
fi
