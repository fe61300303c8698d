#!/usr/bin/env bash
# Session 40, call 1: fused_pc.cuh (cells made apart from the sweep) in its first form (every
# producer thread copying a unit's tile out; bench/lab/fused_pc.patch now holds the second)
# against main, prebuilt here:
#   PATCHES=bench/lab/fused_pc.patch bash bench/lab/prebuilt_ab.sh HEAD   (old = main, new =
#   the patch; fused_pc is taken where it applies with MAS_FUSED_PC=1)
# Device: run(carry=["build-prebuilt"], command="bash bench/lab/pc_run.sh")  (~5 min)
# Output: $OUT/tests.log (new's test_fused_cuda with MAS_FUSED_PC=1: --small, then the full
# set, then memcheck and racecheck of --small), $OUT/ab.log (three rounds of old / new /
# new with MAS_FUSED_PC=1 at the shapes below; then B=8 T=4096 with the tiles-ahead kernel
# limited to 8 slabs against every item taking it).
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A
SH="32 150 800 80;16 150 800 80;1 150 800 80;32 100 400 80;8 256 1024 80;32 512 2048 80"
echo "new/test_fused_cuda --small, MAS_FUSED_PC=1" >>"$L"
MAS_FUSED_PC=1 timeout 60 ./new/test_fused_cuda --small >"$OUT/small.log" 2>&1
rc=$?
grep -E 'seed|FAIL|checks' "$OUT/small.log" | head -20 >>"$L"
echo "small: rc $rc, $((SECONDS - t0)) s" >>"$L"
pcs="pc"; [ $rc = 124 ] && pcs="" # stuck: time main only
echo "new/test_fused_cuda --small" >>"$L"
timeout 60 ./new/test_fused_cuda --small 2>&1 | grep -E 'seed|FAIL|checks' | head -8 >>"$L"
for k in 1 2 3; do
  for v in old new $pcs; do
    echo "=== $v, round $k" >>"$A"
    if [ $v = pc ]; then MAS_FUSED_PC=1 MAS_LOOP_SHAPES="$SH" timeout 60 ./new/loop 40 >>"$A" 2>&1
    else MAS_LOOP_SHAPES="$SH" timeout 60 "./$v/loop" 40 >>"$A" 2>&1; fi
  done
done
echo "ab: $((SECONDS - t0)) s" >>"$L"
[ -n "$pcs" ] && echo "new/test_fused_cuda, MAS_FUSED_PC=1" >>"$L" &&
MAS_FUSED_PC=1 timeout 150 ./new/test_fused_cuda 2>&1 | grep -E 'seed|FAIL|checks' | head -20 >>"$L"
echo "full: $((SECONDS - t0)) s" >>"$L"
for tool in memcheck racecheck; do
  [ -n "$pcs" ] || break
  echo "$tool new/test_fused_cuda --small, MAS_FUSED_PC=1" >>"$L"
  MAS_FUSED_PC=1 timeout 100 compute-sanitizer --tool $tool --print-limit 3 ./new/test_fused_cuda --small 2>&1 |
    grep -E 'seed|FAIL|checks|SUMMARY|Error|Hazard' | head -12 >>"$L"
  echo "$tool: $((SECONDS - t0)) s" >>"$L"
done
for v in main all; do
  echo "=== T=4096 $v" >>"$A"
  if [ $v = all ]; then MAS_LOOP_SHAPES="8 4096 32768 80" MAS_FUSED_AHEAD_SLABS=64 timeout 60 ./new/loop 40 >>"$A" 2>&1
  else MAS_LOOP_SHAPES="8 4096 32768 80" timeout 60 ./new/loop 40 >>"$A" 2>&1; fi
done
echo "done: $((SECONDS - t0)) s" >>"$L"
