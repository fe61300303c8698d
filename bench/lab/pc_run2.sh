#!/usr/bin/env bash
# Session 40, second form of fused_pc.cuh (bench/lab/fused_pc.patch: a copier warp; HALF: warps
# 5..8 idle for units of at most 32 tokens) against main, prebuilt here:
#   rm -rf build-prebuilt && PATCHES=bench/lab/fused_pc.patch bash bench/lab/prebuilt_ab.sh HEAD
# Device: run(carry=["build-prebuilt"], command="bash bench/lab/pc_run2.sh")  (~4 min)
# Output: $OUT/tests.log, $OUT/ab.log (sides old, new, 1 (MAS_FUSED_PC=1) and 2 (its HALF
# form), three rounds; then B=8 T=4096 for kAheadMaxSlabs)
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A
SH="32 150 800 80;16 150 800 80;1 150 800 80;32 100 400 80;8 256 1024 80;32 192 1000 80;48 150 800 80;32 512 2048 80;16 1024 4096 80"
ok=""
for m in 1 2; do
  echo "new/test_fused_cuda --small, MAS_FUSED_PC=$m" >>"$L"
  MAS_FUSED_PC=$m timeout 60 ./new/test_fused_cuda --small >"$OUT/small$m.log" 2>&1
  rc=$?
  grep -E 'seed|FAIL|checks' "$OUT/small$m.log" | head -12 >>"$L"
  echo "small $m: rc $rc, $((SECONDS - t0)) s" >>"$L"
  [ $rc = 124 ] || ok="$ok $m"
done
for k in 1 2 3; do
  for v in old new $ok; do
    echo "=== $v, round $k" >>"$A"
    case $v in
      1|2) MAS_FUSED_PC=$v MAS_LOOP_SHAPES="$SH" timeout 60 ./new/loop 40 >>"$A" 2>&1 ;;
      *) MAS_LOOP_SHAPES="$SH" timeout 60 "./$v/loop" 40 >>"$A" 2>&1 ;;
    esac
  done
done
echo "ab: $((SECONDS - t0)) s" >>"$L"
for m in $ok; do
  echo "new/test_fused_cuda, MAS_FUSED_PC=$m" >>"$L"
  MAS_FUSED_PC=$m timeout 100 ./new/test_fused_cuda 2>&1 | grep -E 'seed|FAIL|checks' | head -12 >>"$L"
  echo "full $m: $((SECONDS - t0)) s" >>"$L"
done
for m in $ok; do
  echo "memcheck new/test_fused_cuda --small, MAS_FUSED_PC=$m" >>"$L"
  MAS_FUSED_PC=$m timeout 60 compute-sanitizer --tool memcheck --print-limit 3 ./new/test_fused_cuda --small 2>&1 |
    grep -E 'FAIL|checks|SUMMARY|Error' | head -8 >>"$L"
done
# kAheadMaxSlabs: B=8 T=4096 with the tiles-ahead kernel limited to 8 slabs (main's kernel
# there) against every item taking it (call 1: one round each, 10.716 against 10.596 ms)
for k in 1 2; do for v in main all; do
  echo "=== T=4096 $v, round $k" >>"$A"
  if [ $v = all ]; then MAS_LOOP_SHAPES="8 4096 32768 80" MAS_FUSED_AHEAD_SLABS=64 timeout 60 ./new/loop 40 >>"$A" 2>&1
  else MAS_LOOP_SHAPES="8 4096 32768 80" timeout 60 ./old/loop 40 >>"$A" 2>&1; fi
done; done
echo "done: $((SECONDS - t0)) s" >>"$L"
