#!/usr/bin/env bash
# Topologies on a GPU machine (issue 12): build, test_topology_cuda (CUDA =
# CPU), compute-sanitizer memcheck and racecheck on its small set, the Python
# GPU tests, then `python -m libmas bench --topology --device cuda`.
#   bench/gpu_topology.sh [--no-python]
# Logs under $OUT (or build-gpu/logs).
set -u -o pipefail
cd "$(dirname "$0")/.."
LOGS=${OUT:-build-gpu/logs}; mkdir -p "$LOGS"
BUILD=${MAS_GPU_BUILD:-build-gpu}
fail=0
lim() { timeout "${MAS_STEP_TIMEOUT:-300}" "$@"; }
echo "=== build ==="
cmake -S . -B "$BUILD" -DMAS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >"$LOGS/build.log" 2>&1 &&
  cmake --build "$BUILD" -j"$(nproc)" --target test_topology_cuda >>"$LOGS/build.log" 2>&1 ||
  { tail -30 "$LOGS/build.log"; exit 1; }
seed=$(date +%s)
echo "=== test_topology_cuda $seed ==="
lim "$BUILD/test_topology_cuda" "$seed" 2>&1 | tee "$LOGS/test_topology_cuda.log" | tail -25 || fail=1
for tool in memcheck racecheck; do
  echo "=== compute-sanitizer $tool (small) ==="
  lim compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/test_topology_cuda" 7 --small \
    >"$LOGS/sanitize-$tool.log" 2>&1; rc=$?
  tail -3 "$LOGS/sanitize-$tool.log"; [ $rc -eq 0 ] || { echo "FAILED rc=$rc"; fail=1; }
done
if [ "${1:-}" != --no-python ]; then
  R=$PWD
  MAS_CALLS=0 OUT=$LOGS bash bench/gpu_python.sh "$R/tests/python/test_topology_cuda.py" \
    "$R/tests/python/test_topology.py" || fail=1
  echo "=== python -m libmas bench --topology --device cuda ==="
  (cd /tmp && lim python3 -m libmas bench --topology --device cuda) 2>&1 | tee "$LOGS/bench.log" | tail -12 || fail=1
fi
exit $fail
