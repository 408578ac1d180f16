#!/usr/bin/env bash
# scripts/fuzz.sh [--build-only | SECONDS] [TARGET...]
# Builds the libFuzzer targets (clang, ASan+UBSan) into build-fuzz/ — only the
# targets and the libraries they link — and runs each TARGET (default: all) for
# SECONDS (default 10) on a copy of its seed corpus tests/fuzz/TARGET/
# (--build-only: builds them and stops; scripts/test.sh builds them while the tests run).
# Prints one summary line per target; exits non-zero if any target crashed,
# leaked, broke an invariant or reported undefined behaviour (the input that did
# it is kept as build-fuzz/findings/TARGET/crash-…, the log as build-fuzz/findings/TARGET.log).
# Environment: FUZZ_JOBS (build parallelism, default 2), FUZZ_PARALLEL (targets run at
# once, default 2), FUZZ_KEEP_CORPUS=DIR
# (keep each grown corpus in DIR/TARGET instead of a temporary copy).
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(router recipe parcel cookie http_framing console_message static_path)

seconds=10
build_only=no
if [ "${1:-}" = "--build-only" ]; then build_only=yes; shift; fi
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then seconds=$1; shift; fi
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz: unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2; }
done

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# The precompiled headers (cmake/troupe_module.cmake) are cached only with these.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER=clang++ -DTROUPE_FUZZ=ON > build-fuzz.configure.log 2>&1 \
  || { cat build-fuzz.configure.log; exit 1; }
rm -f build-fuzz.configure.log
cmake --build build-fuzz -j "${FUZZ_JOBS:-2}" --target "${targets[@]/%/_fuzz}"
[ "$build_only" = no ] || exit 0

# A finding must fail the run, also from UBSan; leaks count (libFuzzer checks them).
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}"

# run_target TARGET: one target's run and its summary line (returns 1 on a finding).
run_target() {
  local t=$1
  findings="build-fuzz/findings/$t"
  mkdir -p "$findings"
  if [ -n "${FUZZ_KEEP_CORPUS:-}" ]; then
    corpus="$FUZZ_KEEP_CORPUS/$t"
    mkdir -p "$corpus"
    cp -n tests/fuzz/"$t"/* "$corpus"/ 2>/dev/null || true
  else
    corpus=$(mktemp -d)
    cp tests/fuzz/"$t"/* "$corpus"/
  fi
  log="build-fuzz/findings/$t.log"
  local rc=0
  # -timeout: one input taking > 10 s is a finding (a hang); -rss_limit_mb: so is 2 GB.
  build-fuzz/bin/"${t}"_fuzz -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
      -rss_limit_mb=2048 -artifact_prefix="$findings/" "$corpus" > "$log" 2>&1 || rc=$?
  [ -n "${FUZZ_KEEP_CORPUS:-}" ] || rm -rf "$corpus"
  fuzz_stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$done_line")
  if [ "$rc" -eq 0 ]; then
    printf 'fuzz: %-16s ok    %ss  runs %s  exec/s %s  cov %s  ft %s  corpus %s  peak %s MB\n' "$t" "$seconds" \
      "$(fuzz_stat number_of_executed_units)" "$(fuzz_stat average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "${corp:-?}" \
      "$(fuzz_stat peak_rss_mb)"
  else
    printf 'fuzz: %-16s FAILED (exit %s) after %s runs — log: %s, inputs: %s\n' "$t" "$rc" \
      "$(fuzz_stat number_of_executed_units)" "$log" "$(ls "$findings" | tr '\n' ' ')"
    grep -m 3 -E 'ERROR: |runtime error:|invariant broken|deadly signal' "$log" | sed 's/^/fuzz:     /' || true
    return 1
  fi
}

# FUZZ_PARALLEL targets at a time (default 2: the machine's two cores; each
# libFuzzer process is single-threaded), each printing its summary when done.
mkdir -p build-fuzz/findings
failed=()
running=()
for t in "${targets[@]}"; do
  run_target "$t" > "build-fuzz/findings/$t.summary" 2>&1 &
  running+=("$!:$t")
  if ((${#running[@]} >= ${FUZZ_PARALLEL:-2})); then
    pid=${running[0]%%:*}; name=${running[0]#*:}; running=("${running[@]:1}")
    wait "$pid" || failed+=("$name"); cat "build-fuzz/findings/$name.summary"
  fi
done
for r in "${running[@]}"; do
  pid=${r%%:*}; name=${r#*:}
  wait "$pid" || failed+=("$name"); cat "build-fuzz/findings/$name.summary"
done
if ((${#failed[@]})); then
  echo "fuzz: findings in: ${failed[*]}" >&2
  exit 1
fi
