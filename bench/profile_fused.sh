#!/usr/bin/env bash
# Stall reasons and per-instruction stall samples (top $TOP by
# bench/sass_top.py) of the fused Gaussian alignment's forward kernel
# (fused_forward.cuh) on one of issue 11's rows: SHAPE="B T S" (default
# "32 512 2048"), D=80, float32, full lengths.
#   [SHAPE="32 150 800"] bench/profile_fused.sh BUILD_DIR   (a build with the
#   Python module, as bench/gpu_one_call.sh leaves it: BUILD_DIR/pkg)
set -u -o pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
BUILD=$(realpath -m "${1:-build-gpu-one}")
export SHAPE=${SHAPE:-32 512 2048}
R=$PWD
cat >"$BUILD/fused_calls.py" <<'PY'
import os, torch, libmas
B, T, S = (int(v) for v in os.environ.get("SHAPE", "32 512 2048").split())
g = torch.Generator().manual_seed(0)
z = torch.randn(B, 80, S, generator=g).cuda()
mean = torch.randn(B, 80, T, generator=g).cuda()
log_std = (0.3 * torch.randn(B, 80, T, generator=g)).cuda()
x = torch.full((B,), T, dtype=torch.int64).cuda()
y = torch.full((B,), S, dtype=torch.int64).cuda()
for _ in range(4):
    libmas.align_gaussian(z, mean, log_std, x, y)
torch.cuda.synchronize()
PY
KERNEL=${KERNEL:-fused_forward}
. bench/ncu_metrics.sh
M=$STALL_METRICS
M="$M,smsp__inst_executed.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum"
M="$M,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
M="$M,smsp__warps_active.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active"
TOP=${TOP:-40} ncu_python_kernel "$KERNEL" "$BUILD/pkg" "$BUILD/fused_calls.py" \
  "$BUILD/fused_sass.csv" "$M"
if [ -n "${OUT:-}" ]; then cp "$BUILD/fused_sass.csv" "$OUT/fused_sass_${SHAPE// /_}.csv"; fi
