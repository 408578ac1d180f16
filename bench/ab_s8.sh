#!/usr/bin/env bash
# bench/ab_s8.sh OLD_BENCH NEW_BENCH [ROUNDS] [SECONDS]: S8 of two builds side by side —
# lease-protected increments of one hot key, wrk -t2 -c64 (bench/harness.cpp "S8"). Each
# round runs `troupe_bench --only S8 --runs 1` of the old build, then of the new one
# (ABAB: a fresh node and deposit each time), so the machine's noise hits both; prints
# each round's increments/s, the exactness check (final value − 2xx answers: 0 to 64)
# and the ratio, then the medians and the median ratio new/old.
# OLD_BENCH / NEW_BENCH: troupe_bench binaries (each runs the troupe next to it).
set -euo pipefail
old_bench=$1; new_bench=$2; rounds=${3:-5}; secs=${4:-10}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/troupe-ab-s8.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# run BENCH OUT: one S8 run; prints "increments/s exactness".
run() {
  "$1" --only S8 --runs 1 --seconds "$secs" --out "$2" > "$2.log" 2>&1 || { cat "$2.log" >&2; exit 1; }
  jq -r '[(.figures[] | select(.scenario == "S8" and (.figure | startswith("lease-protected"))) | .median),
          (.figures[] | select(.scenario == "S8" and (.figure | startswith("final value"))) | .median)] | @tsv' \
    "$2/RESULTS.json"
}
old_all=(); new_all=(); ratios=()
for ((r = 1; r <= rounds; r++)); do
  mkdir -p "$tmp/old-$r" "$tmp/new-$r"
  read -r a a_gap < <(run "$old_bench" "$tmp/old-$r")
  read -r b b_gap < <(run "$new_bench" "$tmp/new-$r")
  ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b / a}')
  old_all+=("$a"); new_all+=("$b"); ratios+=("$ratio")
  printf 'round %d: old %.0f incr/s (gap %s) | new %.0f incr/s (gap %s) | ratio %s | load %s\n' \
    "$r" "$a" "$a_gap" "$b" "$b_gap" "$ratio" "$(cut -d' ' -f1 /proc/loadavg)"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "median old: $(median "${old_all[@]}") incr/s; median new: $(median "${new_all[@]}") incr/s"
echo "median ratio new/old: $(median "${ratios[@]}")"
