#!/usr/bin/env bash
# Nsight Compute profile of the soft sweeps on CUDA (issue 4) on a GPU
# machine: for each target row (bench_soft_cuda --only fs|o2m|m2m), the full
# section set and per-instruction stall samples of its forward and backward
# sweep (summarised by bench/ncu_summary.py). Text reports go under $OUT
# (or build-gpu-soft/profile).
#   bench/profile_soft.sh [BIN_DIR]   (BIN_DIR holds bench_soft_cuda;
#   MAS_PROFILE_OPS="o2m m2m" limits the rows)
set -u
cd "$(dirname "$0")/.."
BIN=${1:-build-gpu-soft}
DIR=${OUT:-build-gpu-soft/profile}
mkdir -p "$DIR"
# the cell policies' mangled names (lib/cuda/soft_cells.cuh)
declare -A CELL=([fs_fwd]='PlusCellI.NS_7LogPlusELb1ELb0ELb0E' [fs_bwd]='PlusCellI.NS_7LogPlusELb1ELb0ELb1E'
                 [attn_fwd]='PlusCellI.NS_7LogPlusELb0ELb1ELb0E' [attn_bwd]='AdjointCell')
for op in ${MAS_PROFILE_OPS:-fs o2m m2m}; do
  for dir in fwd bwd; do
    key=$([ $op = fs ] && echo fs_$dir || echo attn_$dir)
    tag=${op}_$dir
    ncu --set full --kernel-name-base mangled -k "regex:${CELL[$key]}" -s 3 -c 1 -o "$DIR/$tag" -f \
        "$BIN/bench_soft_cuda" --only $op >/dev/null 2>&1
    ncu -i "$DIR/$tag.ncu-rep" --page details >"$DIR/$tag.details.txt" 2>&1
    ncu -i "$DIR/$tag.ncu-rep" --page source --csv --print-source sass >"$DIR/$tag.sass.csv" 2>&1
    rm -f "$DIR/$tag.ncu-rep"
    echo "== $tag"
    grep -E "^ *(Duration|Elapsed Cycles|Warp Cycles Per Issued|Issued Ipc Active|Registers Per|Achieved Occupancy)" "$DIR/$tag.details.txt" | head -6
    python3 bench/ncu_summary.py "$DIR/$tag.sass.csv" 10 | tee "$DIR/$tag.summary.txt"
    gzip -f "$DIR/$tag.sass.csv"
  done
done
