#!/usr/bin/env bash
# Session 37's last call: B=8 T=4096 S=32768 (32 slabs of 128 tokens an item, two launches),
# where the landed plan gives the last slab the whole pool (64 slots), old (main before it)
# against new (the landed tree) at four policies, C level (fused_loop, MAS_LOOP_SHAPES).
#   rm -rf build-prebuilt/old && KEEP=1 bash bench/lab/prebuilt_ab.sh eea714f   (main before
#   session 37; its loop takes MAS_LOOP_SHAPES)
# Device: run(carry=["build-prebuilt", "bench/lab/ahead_long_run.sh"],
#             command="bash bench/lab/ahead_long_run.sh")                   (~3 min)
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A, ab_rounds
export MAS_LOOP_SHAPES="8 4096 32768 80;32 512 2048 80"
for k in 1 2 3; do
  echo "=== old, round $k" >>"$A"; timeout 100 ./old/loop 20 >>"$A" 2>&1
  for p in "36 21 17" "0 0 0" "8 0 17" "4 0 17"; do
    echo "=== new ahead=$p, round $k" >>"$A"; MAS_FUSED_AHEAD="$p" timeout 100 ./new/loop 20 >>"$A" 2>&1
  done
done
echo "done: $((SECONDS - t0)) s" >>"$L"
