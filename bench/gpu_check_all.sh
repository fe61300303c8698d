#!/usr/bin/env bash
# Every GPU test of main in one call (the C test programs, the Python GPU
# tests), then the host-path profile of a small call and the cost-of-a-call
# table. Logs under $OUT (or build-gpu/logs).
#   bench/gpu_check_all.sh [--no-python] [--no-calls]
set -u -o pipefail
cd "$(dirname "$0")/.."
LOGS=${OUT:-build-gpu/logs}; mkdir -p "$LOGS"
BUILD=${MAS_GPU_BUILD:-build-gpu}
PY=1 CALLS=1
for a in "$@"; do case "$a" in --no-python) PY= ;; --no-calls) CALLS= ;; esac; done
fail=0
lim() { timeout "${MAS_STEP_TIMEOUT:-300}" "$@"; }
echo "=== build ==="
cmake -S . -B "$BUILD" -DMAS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >"$LOGS/build.log" 2>&1 &&
  cmake --build "$BUILD" -j"$(nproc)" >>"$LOGS/build.log" 2>&1 || { tail -30 "$LOGS/build.log"; exit 1; }
seed=$(date +%s)
for t in "test_hard_cuda $seed" "test_soft_cuda $seed small" "test_likelihood_cuda $seed --small"; do
  echo "=== $t ==="
  lim "$BUILD"/$t >"$LOGS/${t%% *}.log" 2>&1; rc=$?
  tail -3 "$LOGS/${t%% *}.log"; [ $rc -eq 0 ] || { echo "FAILED rc=$rc"; fail=1; }
done
for t in test_hard_cuda test_soft_cuda; do
  echo "=== memcheck $t (small) ==="
  arg=--small; [ $t = test_soft_cuda ] && arg=small
  lim compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/$t" 7 $arg >"$LOGS/memcheck-$t.log" 2>&1
  rc=$?; tail -2 "$LOGS/memcheck-$t.log"; [ $rc -eq 0 ] || { echo "FAILED rc=$rc"; fail=1; }
done
echo "=== kernels of one small call (ncu) ==="
for shape in "16 60 300 durations" "32 128 512 durations" "32 150 800 durations"; do
  lim ncu --clock-control none --metrics gpu__time_duration.sum -s 21 -c 4 "$BUILD/bench_hard_cuda" --one $shape \
    2>&1 | grep -E "hard_|memset|duration" | sed 's/  */ /g' | head -8; echo "  ($shape)"
done
if [ -n "$PY" ]; then
  MAS_CALLS=0 OUT=$LOGS bash bench/gpu_python.sh tests/python/test_cuda.py tests/python/test_soft_cuda.py \
    tests/python/test_custom_ops.py tests/python/test_likelihood_cuda.py || fail=1
  echo "=== host path of a small call ==="
  (cd /tmp && PYTHONUNBUFFERED=1 lim python3 "$OLDPWD/bench/profile_calls.py" --calls 2000) 2>&1 | tee "$LOGS/profile_calls.log" | head -60
  if [ -n "$CALLS" ]; then
    (cd /tmp && lim python3 -m libmas bench --device cuda --calls) 2>&1 | tee "$LOGS/calls.log" | tail -32 || fail=1
  fi
fi
exit $fail
