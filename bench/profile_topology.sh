#!/usr/bin/env bash
# Stall reasons of the topology kernels (ncu), for the CTC Viterbi row and the
# 3-state HMM row of `test_topology_cuda 1 --bench` (launches: 23 a row, the
# first 3 warm-ups), and per-instruction stall samples of the CTC row as CSV
# under $OUT (or the build dir).
#   bench/profile_topology.sh [BUILD_DIR]   (BUILD_DIR: a CMake build with libmas.a)
set -u -o pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
BUILD=${1:-${MAS_GPU_BUILD:-build-gpu-one}}
[ -f "$BUILD/libmas.a" ] || { echo "no $BUILD/libmas.a: build first (bench/gpu_one_call.sh)"; exit 1; }
nvcc -std=c++17 -O2 -lineinfo -arch=sm_90 -Iinclude -Ilib -Itests/c tests/cuda/test_topology_cuda.cu \
  "$BUILD/libmas.a" -lm -lpthread -o "$BUILD/test_topology_prof" || exit 1
. bench/ncu_metrics.sh
M=$STALL_METRICS
M="$M,smsp__inst_executed.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum"
for skip in 5 28; do
  echo "== topo_viterbi launch $skip"
  ncu --kernel-name regex:topo_viterbi --launch-skip $skip --launch-count 1 --metrics "$M" \
    "$BUILD/test_topology_prof" 1 --bench 2>&1 | grep -E "topo_viterbi|smsp__|sm__|gpu__" \
    | sed "${SHORT_STALLS[@]}"
done
ncu --kernel-name regex:topo_viterbi --launch-skip 5 --launch-count 1 --section SourceCounters \
  --section WarpStateStats --page source --print-source sass --csv \
  "$BUILD/test_topology_prof" 1 --bench >"${OUT:-$BUILD}/topo_viterbi_sass.csv" 2>&1
echo "per-instruction samples: ${OUT:-$BUILD}/topo_viterbi_sass.csv"
