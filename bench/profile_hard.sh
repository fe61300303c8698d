#!/usr/bin/env bash
# Nsight Compute profile of the CUDA hard MAS on a GPU machine: per-kernel
# durations of one warm call at each shape, then the full section set and
# per-instruction stall samples of the named kernels (summarised by
# bench/ncu_summary.py). Writes text reports under $OUT (or build-gpu/profile).
#   bench/profile_hard.sh [BIN_DIR] [small|large]
#     BIN_DIR holds bench_hard_cuda (default build-gpu)
#     small: the one-block kernel (hard_small) at issue 9's training shapes
#     large (default): the multi-kernel path (hard_forward, hard_backtrack),
#       which runs for T > 1024
set -u
cd "$(dirname "$0")/.."
BIN=${1:-build-gpu}
MODE=${2:-large}
DIR=${OUT:-build-gpu/profile}
mkdir -p "$DIR"
one() { echo "$BIN/bench_hard_cuda --one $1"; }

if [ "$MODE" = small ]; then
  TIMED=("16 60 300 durations" "32 128 512 durations" "32 150 800 durations" "32 150 800 path")
  FULL=("hard_small:16 60 300 durations" "hard_small:32 150 800 durations" "hard_small:32 150 800 path")
else
  TIMED=("32 2048 8192 durations" "32 2048 8192 path" "1 2048 8192 path")
  FULL=("hard_forward:32 2048 8192 durations" "hard_backtrack:32 2048 8192 durations"
        "hard_forward:1 2048 8192 path" "hard_backtrack:1 2048 8192 path")
fi

for shape in "${TIMED[@]}"; do
  tag=$(echo "$shape" | tr ' ' '_')
  # the kernels of warm calls (the bench warms up first; 8 launches cover a call)
  ncu --clock-control none --metrics gpu__time_duration.sum -k regex:hard_ -s 8 -c 8 \
      $(one "$shape") >"$DIR/kernels_$tag.txt" 2>&1
  echo "== $shape"
  grep -E "hard_|gpu__time" "$DIR/kernels_$tag.txt" | sed 's/  */ /g' | tail -8
done
for entry in "${FULL[@]}"; do
  k=${entry%%:*}
  shape=${entry#*:}
  tag=${k}_$(echo "$shape" | tr ' ' '_')
  ncu --set full --import-source no -k regex:"$k" -s 5 -c 1 -o "$DIR/$tag" -f $(one "$shape") \
      >/dev/null 2>&1
  ncu -i "$DIR/$tag.ncu-rep" --page details >"$DIR/$tag.details.txt" 2>&1
  ncu -i "$DIR/$tag.ncu-rep" --page source --csv --print-source sass >"$DIR/$tag.sass.csv" 2>&1
  rm -f "$DIR/$tag.ncu-rep"
  echo "== $k $shape"
  grep -E "Duration|Elapsed Cycles|Warp Cycles Per Issued|Issued Ipc Active|Executed Ipc" \
    "$DIR/$tag.details.txt" | head -6
  python3 bench/ncu_summary.py "$DIR/$tag.sass.csv" 25 | tee "$DIR/$tag.summary.txt"
  gzip -f "$DIR/$tag.sass.csv"
done
