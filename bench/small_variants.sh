#!/usr/bin/env bash
# Variants of the one-block hard MAS kernel timed against each other in one
# call (the kernel lab of issue 9): each VARIANT is a directory holding
# cuda/hard_small.cuh (a copy of lib/cuda/hard_small.cuh with the change),
# and optionally bench_small_phases.cu (when the variant changes what the
# bench launches); "lib" is the working tree's own header. Each is built
# into tests/cuda/bench_small_phases.cu (phase stamps, rounds, kernel event
# time) and run REPEATS times, the variants alternating, so that a clock or
# host drift shows as a spread instead of as a difference.
# Usage (on the GPU machine): bench/small_variants.sh [-n REPEATS] VARIANT...
#   e.g. mkdir -p gv/base/cuda && git show HEAD:lib/cuda/hard_small.cuh >
#        gv/base/cuda/hard_small.cuh && bench/small_variants.sh gv/base lib
# Prints each run's kernel and round lines; the full output goes to
# $OUT/variants.log (or build-variants/variants.log). Exit: non-zero when a
# variant fails to build.
set -u -o pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
ARCH=${MAS_CUDA_ARCH:-90}
REPEATS=2
if [ "${1:-}" = -n ]; then
  REPEATS=$2
  shift 2
fi
[ $# -ge 1 ] || { sed -n 2,16p "$0"; exit 2; }
B=build-variants
LOG=${OUT:-$B}/variants.log
mkdir -p "$B" "$(dirname "$LOG")"
gcc -std=c11 -O2 -Iinclude -c lib/common/status.c -o "$B/status.o" || exit 1
fail=0
k=0
for v in "$@"; do
  inc=lib
  src=tests/cuda/bench_small_phases.cu
  if [ "$v" != lib ]; then
    inc=$v
    [ -f "$v/bench_small_phases.cu" ] && src=$v/bench_small_phases.cu
  fi
  nvcc -std=c++17 -O2 -lineinfo -arch=sm_"$ARCH" -I"$inc" -Iinclude -Ilib -Itests/c -Itests/cuda \
    "$src" "$B/status.o" -o "$B/bsp_$k" >"$B/nvcc_$k.log" 2>&1 &
  k=$((k + 1))
done
wait
k=0
for v in "$@"; do
  [ -x "$B/bsp_$k" ] || { echo "$v: build failed"; cat "$B/nvcc_$k.log"; fail=1; }
  k=$((k + 1))
done
[ "$fail" = 0 ] || exit 1
: >"$LOG"
for rep in $(seq "$REPEATS"); do
  k=0
  for v in "$@"; do
    echo "=== variant $v, run $rep" >>"$LOG"
    "$B/bsp_$k" >>"$LOG" 2>&1 || fail=1
    k=$((k + 1))
  done
done
grep -E "^=== variant|kernel |rounds \(cycles\)|status \+ backtrack" "$LOG"
exit "$fail"
