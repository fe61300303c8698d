#!/usr/bin/env bash
# Nsight Compute profile of the CUDA hard MAS on a GPU machine: per-kernel
# durations of one call at a small and a large shape, then the full section
# set and per-instruction stall samples of the forward sweep and the
# backtrack (summarised by bench/ncu_summary.py). Writes text reports under
# $OUT (or build-gpu/profile).
#   bench/profile_hard.sh [BIN_DIR]   (BIN_DIR holds bench_hard_cuda; default build-gpu)
set -u
cd "$(dirname "$0")/.."
BIN=${1:-build-gpu}
DIR=${OUT:-build-gpu/profile}
mkdir -p "$DIR"
one() { "$BIN/bench_hard_cuda" --one "$@"; }
for shape in "32 128 512 path" "32 512 2048 path" "32 2048 8192 durations" "1 2048 8192 path"; do
  tag=$(echo "$shape" | tr ' ' '_')
  # kernels of one warm call (the bench warms up with 5 calls of 4 launches)
  ncu --clock-control none --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
      -s 21 -c 6 $(echo "$BIN/bench_hard_cuda --one $shape") >"$DIR/kernels_$tag.txt" 2>&1
  grep -E "hard_|memset|gpu__time|warps_active" "$DIR/kernels_$tag.txt" | sed 's/  */ /g' | head -16
done
for k in hard_forward hard_backtrack; do
  for shape in "32 128 512 path" "32 512 2048 path" "32 2048 8192 durations"; do
    tag=${k}_$(echo "$shape" | tr ' ' '_')
    ncu --set full -k regex:$k -s 5 -c 1 -o "$DIR/$tag" -f $(echo "$BIN/bench_hard_cuda --one $shape") >/dev/null 2>&1
    ncu -i "$DIR/$tag.ncu-rep" --page details >"$DIR/$tag.details.txt" 2>&1
    ncu -i "$DIR/$tag.ncu-rep" --page source --csv --print-source sass >"$DIR/$tag.sass.csv" 2>&1
    rm -f "$DIR/$tag.ncu-rep"
    grep -E "Duration|Elapsed Cycles|Warp Cycles Per Issued|Issued Ipc Active" "$DIR/$tag.details.txt" | head -5
    python3 bench/ncu_summary.py "$DIR/$tag.sass.csv" 8 | tee "$DIR/$tag.summary.txt"
    gzip -f "$DIR/$tag.sass.csv"
  done
done
