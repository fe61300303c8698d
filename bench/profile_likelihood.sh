#!/usr/bin/env bash
# Stall reasons and instruction mix of the likelihood kernel (ncu metrics),
# for the first GMM row and the Glow-TTS row of bench_likelihood_cuda --quick.
#   bench/profile_likelihood.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
BUILD=${MAS_GPU_BUILD:-build-gpu}
cmake -S . -B "$BUILD" -DMAS_CUDA=ON -DMAS_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null 2>&1 \
  && cmake --build "$BUILD" -j"$(nproc)" --target bench_likelihood_cuda >/dev/null 2>&1 \
  || { echo "build failed"; exit 1; }
. bench/ncu_metrics.sh
M=$STALL_METRICS
M="$M,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,sm__cycles_elapsed.avg"
# launches of --quick: 8 per row (3 warm-up + 5 timed); row 1 GMM 5000x256, row 3 Glow-TTS
for skip in 2 18; do
  echo "== launch $skip"
  ncu --kernel-name regex:loglik_kernel --launch-skip $skip --launch-count 1 --metrics "$M" \
    "$BUILD/bench_likelihood_cuda" --quick 2>&1 | grep -E "loglik_kernel|smsp__|l1tex__|sm__" \
    | sed "${SHORT_STALLS[@]}"
done
# Per-instruction stall samples of the Glow-TTS launch, as CSV under $OUT (or the build dir)
if [ "${MAS_PROFILE_SOURCE:-0}" = 1 ]; then
  ncu --kernel-name regex:loglik_kernel --launch-skip 18 --launch-count 1 --section SourceCounters \
    --section WarpStateStats --page source --print-source sass --csv \
    "$BUILD/bench_likelihood_cuda" --quick >"${OUT:-$BUILD}/loglik_sass.csv" 2>&1
  echo "per-instruction samples: ${OUT:-$BUILD}/loglik_sass.csv"
fi
