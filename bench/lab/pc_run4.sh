#!/usr/bin/env bash
# Session 41, call 2: why test_fused_cuda failed with MAS_FUSED_PC=1 in call 1 (seed 1796684210:
# "fused status 11" at B=5 T=232 S=272 J=8), and whether a deeper ring (new2: kPcSlots = 4,
# bench/lab/pc_slots4.patch) speeds the shapes whose producers keep up (B=16 / B=1 T=150).
#   KEEP=1 PATCHES2="bench/lab/fused_pc.patch bench/lab/pc_slots4.patch" bash bench/lab/prebuilt_ab.sh HEAD
# Device: run(carry=["build-prebuilt"], command="bash bench/lab/pc_run4.sh")  (~3 min)
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A
SEED=1796684210
for m in 1 2 0; do
  echo "new/test_fused_cuda $SEED, MAS_FUSED_PC=$m" >>"$L"
  MAS_FUSED_PC=$m timeout 60 ./new/test_fused_cuda $SEED 2>&1 | grep -E 'seed|FAIL|checks' | head -6 >>"$L"
done
echo "memcheck new/test_fused_cuda $SEED, MAS_FUSED_PC=1" >>"$L"
MAS_FUSED_PC=1 timeout 120 compute-sanitizer --tool memcheck --print-limit 4 ./new/test_fused_cuda $SEED >"$OUT/mc1.log" 2>&1
grep -E 'FAIL|checks|SUMMARY|Error|at 0x|by thread|Address' "$OUT/mc1.log" | head -30 >>"$L"
echo "memcheck: $((SECONDS - t0)) s" >>"$L"
echo "new2/test_fused_cuda --small, MAS_FUSED_PC=2" >>"$L"
MAS_FUSED_PC=2 timeout 60 ./new2/test_fused_cuda --small 2>&1 | grep -E 'seed|FAIL|checks' | head -6 >>"$L"
SH="32 150 800 80;16 150 800 80;1 150 800 80;8 256 1024 80;32 192 1000 80"
for k in 1 2 3; do for v in old new new2; do
  echo "=== $v, round $k" >>"$A"
  MAS_FUSED_PC=2 MAS_LOOP_SHAPES="$SH" timeout 60 "./$v/loop" 40 >>"$A" 2>&1
done; done
echo "done: $((SECONDS - t0)) s" >>"$L"
