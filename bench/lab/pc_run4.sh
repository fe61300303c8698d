#!/usr/bin/env bash
# Session 41's call 2, not run (no machine; the device time ran out): test_fused_cuda with the
# seed that failed with MAS_FUSED_PC=1 in call 1 (1796684210: "fused status 11" at B=5 T=232
# S=272 J=8, the occupancy fault fixed by fused.cu's occupancy_asked), on new (main with
# bench/lab/fused_pc.patch) and new2 (also a ring of four tiles a slab, bench/lab/pc_slots4.patch),
# then main's kernels' full set on new2 and three rounds of old / new / new2 over the short
# shapes: does a deeper ring speed those whose producers keep up (B=16 / B=1 T=150)?
#   rm -rf build-prebuilt && PATCHES=bench/lab/fused_pc.patch \
#     PATCHES2="bench/lab/fused_pc.patch bench/lab/pc_slots4.patch" bash bench/lab/prebuilt_ab.sh HEAD
# Device: run(carry=["build-prebuilt"], command="bash bench/lab/pc_run4.sh")  (~2 min)
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A
SEED=1796684210
for v in new new2; do for m in 1 2; do
  echo "$v/test_fused_cuda $SEED, MAS_FUSED_PC=$m" >>"$L"
  MAS_FUSED_PC=$m timeout 60 ./$v/test_fused_cuda $SEED 2>&1 | grep -E 'seed|FAIL|checks' | head -6 >>"$L"
done; done
echo "new2/test_fused_cuda, MAS_FUSED_PC=0 (main's kernels with the fix)" >>"$L"
MAS_FUSED_PC=0 timeout 60 ./new2/test_fused_cuda 2>&1 | grep -E 'seed|FAIL|checks' | head -6 >>"$L"
echo "new2/test_fused_cuda --small, MAS_FUSED_PC=2" >>"$L"
MAS_FUSED_PC=2 timeout 60 ./new2/test_fused_cuda --small 2>&1 | grep -E 'seed|FAIL|checks' | head -6 >>"$L"
SH="32 150 800 80;16 150 800 80;1 150 800 80;8 256 1024 80;32 192 1000 80"
for k in 1 2 3; do for v in old new new2; do
  echo "=== $v, round $k" >>"$A"
  MAS_FUSED_PC=2 MAS_LOOP_SHAPES="$SH" timeout 60 "./$v/loop" 40 >>"$A" 2>&1
done; done
echo "done: $((SECONDS - t0)) s" >>"$L"
