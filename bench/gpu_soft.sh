#!/usr/bin/env bash
# One command on a GPU machine for the soft-alignment ops (issue 4): build (or
# take prebuilt binaries from $MAS_SOFT_BIN), run the GPU tests, the tests'
# small set under compute-sanitizer memcheck and racecheck, then print the
# benchmark table.
#   bench/gpu_soft.sh [--quick | --shapes] [--no-sanitize] [--no-test]
# (--shapes: the three target rows at several launch shapes, nothing else)
# Logs go to $OUT (if set) or build-gpu-soft/logs.
set -u -o pipefail
cd "$(dirname "$0")/.."
. bench/racecheck_ok.sh
QUICK= SANITIZE=1 TEST=1
for a in "$@"; do
  case "$a" in
    --quick) QUICK=--quick ;;
    --shapes) QUICK=--shapes ;;
    --no-sanitize) SANITIZE= ;;
    --no-test) TEST= ;;
    *) echo "unknown option $a" >&2; exit 2 ;;
  esac
done
BUILD=${MAS_GPU_BUILD:-build-gpu-soft}
LOGS=${OUT:-$BUILD/logs}
mkdir -p "$LOGS"
fail=0
step() { echo; echo "=== $* ==="; }
limit() { timeout "${MAS_STEP_TIMEOUT:-300}" "$@"; }

if [ -n "${MAS_SOFT_BIN:-}" ]; then
  BIN=$MAS_SOFT_BIN
else
  step build
  cmake -S . -B "$BUILD" -DMAS_CUDA=ON -DMAS_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release >"$LOGS/cmake.log" 2>&1 \
    && cmake --build "$BUILD" -j"$(nproc)" --target test_soft_cuda bench_soft_cuda >"$LOGS/build.log" 2>&1 \
    || { tail -40 "$LOGS/build.log" "$LOGS/cmake.log"; exit 1; }
  BIN=$BUILD
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$LOGS/device.txt"

if [ -n "$TEST" ]; then
  step "GPU tests (test_soft_cuda)"
  SEED=${MAS_TEST_SEED:-$(date +%s)}
  echo "seed $SEED (replay: MAS_TEST_SEED=$SEED)"
  # line-buffered, so a crash or a timeout still leaves the cases that ran
  MAS_TEST_VERBOSE=1 limit stdbuf -oL "$BIN/test_soft_cuda" "$SEED" >"$LOGS/test.log" 2>&1; rc=$?
  grep -v "^case " "$LOGS/test.log" | tail -25
  [ $rc -eq 0 ] || { echo "exit $rc; last case started: $(grep '^case ' "$LOGS/test.log" | tail -1)"; fail=1; }
fi

if [ -n "$SANITIZE" ]; then
  for tool in memcheck racecheck; do
    step "compute-sanitizer --tool $tool (small test set)"
    limit compute-sanitizer --tool $tool --print-limit 1000000 --error-exitcode 9 "$BIN/test_soft_cuda" 5 small \
      >"$LOGS/sanitize-$tool.log" 2>&1; rc=$?
    tail -4 "$LOGS/sanitize-$tool.log"; echo "exit $rc"
    if [ $tool = racecheck ] && [ $rc -eq 9 ]; then
      racecheck_ok "$LOGS/sanitize-$tool.log" && rc=0
    fi
    [ $rc -eq 0 ] || fail=1
  done
fi

step "benchmark (bench_soft_cuda $QUICK)"
limit "$BIN/bench_soft_cuda" $QUICK 2>&1 | tee "$LOGS/bench.md" || fail=1
exit $fail
