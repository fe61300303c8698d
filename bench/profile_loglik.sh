#!/usr/bin/env bash
# Stall reasons and per-instruction stall samples (top $TOP by
# bench/sass_top.py) of a likelihood kernel on one of issue 10's rows:
#   WORK=gmm (default): the uniform-mixture kernel (loglik_uniform.cuh) on the
#     GMM row (5000 states x 256 Gaussians, J=36, 256 frames) in precision
#     $PRECISION ("float32", the default, or "tf32");
#   WORK=glow: the one-Gaussian-a-state kernel on the Glow-TTS row (B=32
#     T=512 S=2048 D=80): loglik_items.cuh, or loglik_items_tc.cuh with
#     PRECISION=tf32.
#   [WORK=glow] [PRECISION=tf32] bench/profile_loglik.sh BUILD_DIR   (a build
#   with the Python module, as bench/gpu_one_call.sh leaves it: BUILD_DIR/pkg)
set -u -o pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
BUILD=$(realpath -m "${1:-build-gpu-one}")
R=$PWD
cat >"$BUILD/gmm_calls.py" <<'PY'
import os, torch, libmas
g = torch.Generator().manual_seed(0)
m = 5000 * 256
gmm = libmas.GMM(torch.randn(m, 36, generator=g).cuda() * 0.5,
                 (torch.rand(m, 36, generator=g) + 0.5).cuda(),
                 (-3 * torch.rand(m, generator=g)).cuda(), [256] * 5000)
x = torch.randn(256, 36, generator=g).cuda()
z = torch.randn(32, 80, 2048, generator=g).cuda()
mean = torch.randn(32, 80, 512, generator=g).cuda()
log_std = (0.3 * torch.randn(32, 80, 512, generator=g)).cuda()
for _ in range(4):
    if os.environ.get("WORK", "gmm") == "glow":
        libmas.gaussian_loglik(z, mean, log_std, precision=os.environ.get("PRECISION", "float32"))
    else:
        gmm.loglik(x, precision=os.environ.get("PRECISION", "float32"))
torch.cuda.synchronize()
PY
KERNEL=loglik_uniform
[ "${WORK:-gmm}" = glow ] && KERNEL=loglik_items
[ "${WORK:-gmm}" = glow ] && [ "${PRECISION:-float32}" = tf32 ] && KERNEL=loglik_items_tc
. bench/ncu_metrics.sh
M=$STALL_METRICS
M="$M,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
M="$M,sm__cycles_elapsed.avg,gpu__time_duration.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
M="$M,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
M="$M,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_write.sum"
ncu_python_kernel "$KERNEL" "$BUILD/pkg" "$BUILD/gmm_calls.py" "$BUILD/gmm_sass.csv" "$M"
