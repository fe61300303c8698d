#!/usr/bin/env bash
# Lab (session 31): why the products of bench/lab/products_lab.cu stop at ~63% of
# the FFMA issue. ncu over its first $LAUNCHES launches (default 165: 5 a variant, all
# of them), for the first launch of each: FFMA and all issued
# instructions, issue active, shared loads and their wavefronts, bank conflicts,
# the shared pipe's busy share, and the stall reasons per issued instruction.
# Here:   nvcc -std=c++17 -O3 -arch=sm_90 -Itests/cuda bench/lab/products_lab.cu \
#           -o build-prebuilt/products_lab   (bench/lab/prebuilt_ab.sh does it)
# Device: bash bench/lab/products_ncu.sh build-prebuilt/products_lab   (~30 s)
set -u
BIN=${1:?usage: products_ncu.sh PRODUCTS_LAB_BINARY}
export PATH="$PATH:/usr/local/cuda/bin"
d=$(dirname "$0") # in bench/lab, or copied beside ncu_metrics.sh by prebuilt_ab.sh
if [ -f "$d/ncu_metrics.sh" ]; then . "$d/ncu_metrics.sh"; else . "$d/../ncu_metrics.sh"; fi
M="sm__cycles_elapsed.avg,smsp__inst_executed.sum,smsp__inst_executed_pipe_fma.sum"
M="$M,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__sass_inst_executed_op_shared_ld.sum"
# the busiest and idlest scheduler (the sweep warp's has two compute warps beside it)
M="$M,smsp__issue_active.max.pct_of_peak_sustained_active,smsp__issue_active.min.pct_of_peak_sustained_active"
M="$M,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
M="$M,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
M="$M,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,$STALL_METRICS"
"$BIN"
ncu --launch-count "${LAUNCHES:-165}" --csv --metrics "$M" "$BIN" 2>/dev/null |
  python3 "$d/ncu_launches.py" --every 5 | sed "${SHORT_STALLS[@]}" # the first launch of each variant
