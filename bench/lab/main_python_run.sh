#!/usr/bin/env bash
# A call on main as it is (written in session 40, not run: no machine came for it):
# (1) `python -m libmas bench --fused --device cuda`, the landed choice as users call it
# (sessions 39-40 ran only the C loop); (2) B=8 T=4096 with the
# tiles-ahead kernel limited to 8 slabs (main: main's kernel there) against every item taking
# it (MAS_FUSED_AHEAD_SLABS=64), to decide fused.cu's kAheadMaxSlabs.
# Device: run(command="bash bench/lab/main_python_run.sh")  (~6 min)
# Output: $OUT/py.log, $OUT/ab.log, $OUT/build.log
set -u
export PATH="$PATH:/usr/local/cuda/bin"
t0=$SECONDS
. bench/gpu_build.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/ab.log" >"$OUT/py.log"
gpu_build . /tmp/b 16 "$OUT/build.log" _C _torch || exit 1
echo "build: $((SECONDS - t0)) s" >>"$OUT/ab.log"
nvcc -std=c++17 -O2 -arch=sm_90 -Iinclude -Itests/c -Itests/cuda -Ibench/lab bench/lab/fused_loop.cu \
  /tmp/b/libmas.a -lcudart -lpthread -lm -o /tmp/loop >>"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
for k in 1 2; do
  for v in main all; do
    echo "=== $v, round $k" >>"$OUT/ab.log"
    if [ $v = all ]; then MAS_LOOP_SHAPES="8 4096 32768 80" MAS_FUSED_AHEAD_SLABS=64 timeout 60 /tmp/loop 40 >>"$OUT/ab.log" 2>&1
    else MAS_LOOP_SHAPES="8 4096 32768 80" timeout 60 /tmp/loop 40 >>"$OUT/ab.log" 2>&1; fi
  done
done
echo "ab: $((SECONDS - t0)) s" >>"$OUT/ab.log"
(cd /tmp && PYTHONPATH=/tmp/b/pkg timeout 300 python3 -m libmas bench --fused --device cuda) >>"$OUT/py.log" 2>&1
echo "python: $((SECONDS - t0)) s" >>"$OUT/py.log"
