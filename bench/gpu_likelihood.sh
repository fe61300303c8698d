#!/usr/bin/env bash
# One command on a GPU machine for the likelihood kernels: build, the GPU
# test (random cases, seed printed), compute-sanitizer memcheck and racecheck
# on the small cases, then the benchmark table.
#   bench/gpu_likelihood.sh [SEED]
# Logs go to $OUT (if set) or build-gpu/logs.
set -u -o pipefail
cd "$(dirname "$0")/.."
SEED=${1:-$(date +%s)}
BUILD=${MAS_GPU_BUILD:-build-gpu}
LOGS=${OUT:-$BUILD/logs}
mkdir -p "$LOGS"
fail=0
step() { echo; echo "=== $* ==="; }
limit() { timeout "${MAS_STEP_TIMEOUT:-600}" "$@"; }

step build
cmake -S . -B "$BUILD" -DMAS_CUDA=ON -DMAS_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 >"$LOGS/build-lik.log" 2>&1 \
  && cmake --build "$BUILD" -j"$(nproc)" --target test_likelihood_cuda bench_likelihood_cuda >>"$LOGS/build-lik.log" 2>&1 \
  || { tail -40 "$LOGS/build-lik.log"; exit 1; }

step "test_likelihood_cuda $SEED"
limit "$BUILD/test_likelihood_cuda" "$SEED" 2>&1 | tee "$LOGS/test-lik.log" | tail -12 || fail=1

for tool in memcheck racecheck; do
  step "compute-sanitizer --tool $tool (small cases)"
  limit compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/test_likelihood_cuda" "$SEED" --small \
    >"$LOGS/sanitize-lik-$tool.log" 2>&1; rc=$?
  tail -3 "$LOGS/sanitize-lik-$tool.log"; echo "exit $rc"
  [ $rc -eq 0 ] || fail=1
done

step "benchmark (bench_likelihood_cuda)"
limit "$BUILD/bench_likelihood_cuda" 2>&1 | tee "$LOGS/bench-lik.log" || fail=1
exit $fail
