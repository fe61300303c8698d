#!/usr/bin/env bash
# One command on a GPU machine: build the CUDA test and benchmark programs,
# run the tests (the tile loader's host check, then the GPU tests),
# compute-sanitizer (memcheck, racecheck) on a small test set, the
# >2^31-element test, then print the benchmark table.
#   bench/gpu.sh [--quick] [--no-sanitize] [--no-large] [--python]
# Logs go to $OUT (if set) or build-gpu/logs.
set -u -o pipefail
cd "$(dirname "$0")/.."
QUICK= SANITIZE=1 LARGE=1 PYTHON=
for a in "$@"; do
  case "$a" in
    --quick) QUICK=--quick ;;
    --no-sanitize) SANITIZE= ;;
    --no-large) LARGE= ;;
    --python) PYTHON=1 ;;
    *) echo "unknown option $a" >&2; exit 2 ;;
  esac
done
BUILD=${MAS_GPU_BUILD:-build-gpu}
LOGS=${OUT:-$BUILD/logs}
mkdir -p "$LOGS"
fail=0
step() { echo; echo "=== $* ==="; }
# A hang (a pipeline waiting forever) must not eat the machine: cap every step.
limit() { timeout "${MAS_STEP_TIMEOUT:-900}" "$@"; }

step build
# (at most 8 log files: what the lent GPU machines hand back)
cmake -S . -B "$BUILD" -DMAS_CUDA=ON -DMAS_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release >"$LOGS/build.log" 2>&1 \
  && cmake --build "$BUILD" -j"$(nproc)" --target test_hard_loader test_hard_cuda bench_hard_cuda >>"$LOGS/build.log" 2>&1 \
  || { tail -40 "$LOGS/build.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$LOGS/device.txt"

step "GPU tests (test_hard_loader on the host, then test_hard_cuda)"
{ limit "$BUILD/test_hard_loader" && limit "$BUILD/test_hard_cuda"; } 2>&1 | tee "$LOGS/test.log" | tail -15 || fail=1

if [ -n "$SANITIZE" ]; then
  for tool in memcheck racecheck; do
    step "compute-sanitizer --tool $tool (small test set)"
    limit compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/test_hard_cuda" 7 --small \
      >"$LOGS/sanitize-$tool.log" 2>&1; rc=$?
    tail -4 "$LOGS/sanitize-$tool.log"; echo "exit $rc"
    [ $rc -eq 0 ] || fail=1
  done
fi

if [ -n "$LARGE" ]; then
  step "more than 2^31 elements (test_hard_cuda --large)"
  limit "$BUILD/test_hard_cuda" 11 --small --large 2>&1 | tee "$LOGS/test-large.log" | tail -4 || fail=1
fi

if [ -n "$PYTHON" ]; then
  step "Python package: pip install, tests/python/test_cuda.py and test_soft_cuda.py, python -m libmas bench --device cuda"
  # MAS_WHEEL: a wheel built elsewhere (saves the build on the GPU machine)
  python3 -m pip install --no-build-isolation --no-deps -q "${MAS_WHEEL:-.}" >"$LOGS/python.log" 2>&1 \
    && (R=$PWD; cd /tmp && python3 -m pytest -q -p no:cacheprovider "$R/tests/python/test_cuda.py" \
        "$R/tests/python/test_soft_cuda.py") 2>&1 | tee -a "$LOGS/python.log" | tail -15 \
    && python3 -m libmas bench --device cuda 2>&1 | tee -a "$LOGS/python.log" | tail -20 \
    || { tail -30 "$LOGS/python.log"; fail=1; }
fi

step "benchmark (bench_hard_cuda)"
limit "$BUILD/bench_hard_cuda" $QUICK 2>&1 | tee "$LOGS/bench.log" || fail=1
exit $fail
