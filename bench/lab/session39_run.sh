#!/usr/bin/env bash
# Session 39's second call: old (main, 8e79e84) against new (this tree: the tiles-ahead kernel's
# roles in loops of their own, bench/lab/ahead_forms_ab.sh's form "t5"; MAS_FUSED_AHEAD_SLABS
# to take it for items of more slabs than fused.cu's kAheadMaxSlabs), prebuilt here:
#   rm -rf build-prebuilt && bash bench/lab/prebuilt_ab.sh 8e79e84
# Device: run(carry=["build-prebuilt"], command="bash bench/lab/session39_run.sh")  (~6 min)
# Output: $OUT/ab.log (three rounds of old / new / new with the kernel for every item
# (MAS_FUSED_AHEAD_SLABS=64) at B=32 T=150, B=32 T=512, B=16 T=1024, then two at B=8 T=4096),
# $OUT/tests.log (new's full test_fused_cuda with its seed, then memcheck, racecheck and
# synccheck of the short set: synccheck for the roles' loops, whose warps reach the block
# barrier from different places).
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A, ab_rounds
rounds() { # N SHAPES
  local k v
  for k in $(seq "$1"); do
    for v in old new all; do
      echo "=== $v, round $k" >>"$A"
      if [ $v = all ]; then MAS_LOOP_SHAPES="$2" MAS_FUSED_AHEAD_SLABS=64 timeout 90 ./new/loop 40 >>"$A" 2>&1
      else MAS_LOOP_SHAPES="$2" timeout 90 "./$v/loop" 40 >>"$A" 2>&1; fi
    done
  done
}
rounds 3 "32 150 800 80;32 512 2048 80;16 1024 4096 80"
rounds 2 "8 4096 32768 80"
echo "ab: $((SECONDS - t0)) s" >>"$L"
echo "new/test_fused_cuda" >>"$L"
timeout 200 ./new/test_fused_cuda 2>&1 | grep -E 'seed|FAIL|checks' | tail -8 >>"$L"
echo "tests: $((SECONDS - t0)) s" >>"$L"
for tool in memcheck racecheck synccheck; do
  echo "$tool new/test_fused_cuda --small" >>"$L"
  timeout 100 compute-sanitizer --tool $tool --print-limit 3 ./new/test_fused_cuda --small 2>&1 |
    grep -E 'seed|FAIL|checks|SUMMARY' | tail -4 >>"$L"
  echo "$tool: $((SECONDS - t0)) s" >>"$L"
done
echo "done: $((SECONDS - t0)) s" >>"$L"
