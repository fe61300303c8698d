#!/usr/bin/env bash
# Session 42's call: fused_pc (bench/lab/fused_pc.patch, second form) with the occupancy fix on
# the GPU, its producers' phases a unit (bench/lab/pc_stamps.patch), and streams
# (bench/lab/pc_streams.patch, MAS_FUSED_PC_STREAMS=1: a producer takes a whole slab-stream and
# loads its coefficients once) against tiles in frame order.
# Here: bash bench/lab/pc_build6.sh (~25 min; build-prebuilt/ with old, new, new2 and small/)
# Device: run(carry=["build-prebuilt"], command="bash bench/lab/pc_run6.sh", kind="nvidia-h100-x1")
# Output: $OUT/tests.log (checks), $OUT/ab.log (ms a call and hashes), $OUT/stamps.log
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A
SEED=1796684210
tst() { # ENV...: new/test_fused_cuda (arguments $TARGS) under the environment, its verdict lines to $L
  echo "new/test_fused_cuda $*" >>"$L"
  env "$@" timeout 120 ./new/test_fused_cuda ${TARGS:-} 2>&1 | grep -E 'seed|FAIL|checks' | head -6 >>"$L"
}
TARGS=$SEED tst MAS_FUSED_PC=1
TARGS=$SEED tst MAS_FUSED_PC=1 MAS_FUSED_PC_STREAMS=1
tst MAS_FUSED_PC=0
tst MAS_FUSED_PC=1 MAS_FUSED_PC_STREAMS=1
echo "tests: $((SECONDS - t0)) s" >>"$L"
SH="32 150 800 80;16 150 800 80;1 150 800 80;8 256 1024 80;32 192 1000 80;48 150 800 80"
for k in 1 2 3; do
  echo "=== old, round $k" >>"$A"
  MAS_LOOP_SHAPES="$SH" timeout 60 ./old/loop 40 >>"$A" 2>&1
  for m in "1 0" "1 1" "2 1"; do set -- $m
    echo "=== new MAS_FUSED_PC=$1 MAS_FUSED_PC_STREAMS=$2, round $k" >>"$A"
    MAS_FUSED_PC=$1 MAS_FUSED_PC_STREAMS=$2 MAS_LOOP_SHAPES="$SH" timeout 60 ./new/loop 40 >>"$A" 2>&1
  done
done
echo "ab: $((SECONDS - t0)) s" >>"$L"
P=$OUT/stamps.log
for s in 0 1; do
  echo "=== MAS_FUSED_PC=1 MAS_FUSED_PC_STREAMS=$s" >>"$P"
  MAS_FUSED_PC=1 MAS_FUSED_PC_STREAMS=$s timeout 60 ./new2/pc_stamps 32 150 800 16 150 800 1 150 800 8 256 1024 >>"$P" 2>&1
done
echo "stamps: $((SECONDS - t0)) s" >>"$L"
echo "memcheck new/test_fused_cuda --small, streams" >>"$L"
MAS_FUSED_PC=1 MAS_FUSED_PC_STREAMS=1 timeout 100 compute-sanitizer --tool memcheck ./new/test_fused_cuda --small 2>&1 | tail -2 >>"$L"
echo "memcheck: $((SECONDS - t0)) s" >>"$L"
S=$OUT/small.log # the barrier: three alternating runs, then synccheck of one small shape each
for k in 1 2 3; do for v in base role; do
  echo "=== $v, run $k" >>"$S"; timeout 60 ./small/bsp_$v >>"$S" 2>&1
done; done
for v in base role; do
  echo "synccheck small/bsp_$v 4 150 400" >>"$L"
  timeout 100 compute-sanitizer --tool synccheck ./small/bsp_$v 4 150 400 2>&1 | tail -2 >>"$L"
done
echo "done: $((SECONDS - t0)) s" >>"$L"
