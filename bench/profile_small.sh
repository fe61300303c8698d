#!/usr/bin/env bash
# Nsight Compute profile of the one-block hard MAS kernel (hard_small) at
# the training shapes of issue 9: per-kernel durations of a warm call, then
# the full section set and per-instruction stall samples (bench/ncu_summary.py).
#   bench/profile_small.sh [BIN_DIR]   (BIN_DIR holds bench_hard_cuda)
set -u
cd "$(dirname "$0")/.."
BIN=${1:-build-gpu}
DIR=${OUT:-build-gpu/profile}
mkdir -p "$DIR"
for shape in "16 60 300 durations" "32 128 512 durations" "32 150 800 durations" "32 150 800 path"; do
  tag=$(echo "$shape" | tr ' ' '_')
  ncu --clock-control none --metrics gpu__time_duration.sum -k regex:hard_ -s 2 -c 2 \
      $(echo "$BIN/bench_hard_cuda --one $shape") >"$DIR/kernels_$tag.txt" 2>&1
  echo "$shape: $(grep -E "hard_|gpu__time" "$DIR/kernels_$tag.txt" | sed 's/  */ /g' | tail -2 | tr '\n' ' ')"
done
for shape in "16 60 300 durations" "32 150 800 durations" "32 150 800 path"; do
  tag=small_$(echo "$shape" | tr ' ' '_')
  ncu --set full --import-source no -k regex:hard_small -s 5 -c 1 -o "$DIR/$tag" -f \
      $(echo "$BIN/bench_hard_cuda --one $shape") >/dev/null 2>&1
  ncu -i "$DIR/$tag.ncu-rep" --page details >"$DIR/$tag.details.txt" 2>&1
  ncu -i "$DIR/$tag.ncu-rep" --page source --csv --print-source sass >"$DIR/$tag.sass.csv" 2>&1
  rm -f "$DIR/$tag.ncu-rep"
  grep -E "Duration|Elapsed Cycles|Warp Cycles Per Issued|Issued Ipc Active|Executed Ipc" "$DIR/$tag.details.txt" | head -6
  python3 bench/ncu_summary.py "$DIR/$tag.sass.csv" 25 | tee "$DIR/$tag.summary.txt"
  gzip -f "$DIR/$tag.sass.csv"
done
