#!/usr/bin/env bash
# Installs the Debian packages troupe needs (only the missing ones), then
# configures and builds everything into build/. Used by run.sh and test.sh;
# `setup.sh --tests` also installs what the tests need beyond the build
# (chromium: the console's end-to-end test; wrk: the benchmark harness's smoke run;
# clang and libclang-rt-14-dev, its libFuzzer and sanitizer runtimes: the fuzz targets;
# postgresql: a throwaway server for the PostgreSQL deposit's tests, never a system service;
# openssl: the CLI the TLS tests make their certificates with).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build ccache pkg-config
          libcaf-dev libboost-dev libssl-dev libmsgpack-cxx-dev libspdlog-dev
          libgtest-dev libtoml11-dev nlohmann-json3-dev libcli11-dev libpq-dev)
if [ "${1:-}" = "--tests" ]; then packages+=(chromium wrk clang libclang-rt-14-dev postgresql openssl); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > build.configure.log 2>&1 \
  || { cat build.configure.log; exit 1; }
rm -f build.configure.log
cmake --build build -j "$(nproc)"
