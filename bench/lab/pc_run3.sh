#!/usr/bin/env bash
# Session 41, call 1: fused_pc as a landing candidate (bench/lab/fused_pc.patch: the second
# form with the host's rule; MAS_FUSED_PC unset = the rule, 0 never, 1 / 2 the full / HALF form
# wherever it applies) against main, prebuilt here:
#   rm -rf build-prebuilt/new && KEEP=1 PATCHES=bench/lab/fused_pc.patch bash bench/lab/prebuilt_ab.sh HEAD
# Device: run(carry=["build-prebuilt"], command="bash bench/lab/pc_run3.sh")  (84 s)
# Output: $OUT/tests.log, $OUT/ab.log: sides old, new (the rule), 0 (the refactored
# fused_forward alone), 1 and 2; three rounds; B=8 T=4096 for kAheadMaxSlabs
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A
SH="32 150 800 80;16 150 800 80;1 150 800 80;32 100 400 80;8 256 1024 80;32 192 1000 80;48 150 800 80;32 512 2048 80;16 1024 4096 80"
for m in 1 2 auto; do
  echo "new/test_fused_cuda --small, MAS_FUSED_PC=$m" >>"$L"
  if [ $m = auto ]; then timeout 60 ./new/test_fused_cuda --small >"$OUT/small$m.log" 2>&1
  else MAS_FUSED_PC=$m timeout 60 ./new/test_fused_cuda --small >"$OUT/small$m.log" 2>&1; fi
  echo "small $m: rc $?, $((SECONDS - t0)) s" >>"$L"
  grep -E 'seed|FAIL|checks' "$OUT/small$m.log" | head -12 >>"$L"
done
side() { # side round
  echo "=== $1, round $2" >>"$A"
  case $1 in
    0|1|2) MAS_FUSED_PC=$1 MAS_LOOP_SHAPES="$SH" timeout 60 ./new/loop 40 >>"$A" 2>&1 ;;
    *) MAS_LOOP_SHAPES="$SH" timeout 60 "./$1/loop" 40 >>"$A" 2>&1 ;;
  esac
}
for k in 1 2 3; do for v in old new 0 1 2; do side $v $k; done; done
echo "ab: $((SECONDS - t0)) s" >>"$L"
full() {
  echo "new/test_fused_cuda, MAS_FUSED_PC=$1" >>"$L"
  MAS_FUSED_PC=$1 timeout 100 ./new/test_fused_cuda 2>&1 | grep -E 'seed|FAIL|checks' | head -12 >>"$L"
  echo "full $1: $((SECONDS - t0)) s" >>"$L"
}
memcheck() {
  echo "memcheck new/test_fused_cuda --small, MAS_FUSED_PC=$1" >>"$L"
  MAS_FUSED_PC=$1 timeout 60 compute-sanitizer --tool memcheck --print-limit 3 ./new/test_fused_cuda --small 2>&1 |
    grep -E 'FAIL|checks|SUMMARY|Error' | head -8 >>"$L"
}
racecheck() { # one call of each precision at B=4 T=150 S=800 (racecheck of the whole set: > 100 s)
  echo "racecheck new/loop 1, B=4 T=150 S=800, MAS_FUSED_PC=$1" >>"$L"
  MAS_FUSED_PC=$1 MAS_LOOP_SHAPES="4 150 800 80" timeout 90 compute-sanitizer --tool racecheck \
    --racecheck-report hazard --print-limit 3 ./new/loop 1 2>&1 | grep -E 'SUMMARY|hazard|Error|access at' | head -10 >>"$L"
  echo "racecheck $1: $((SECONDS - t0)) s" >>"$L"
}
# in the order of what the decision needs first (a call is cut at its limit)
full 2; full 1; memcheck 2; racecheck 2; full 0; memcheck 1
for v in main all; do
  echo "=== T=4096 $v, round 1" >>"$A"
  if [ $v = all ]; then MAS_LOOP_SHAPES="8 4096 32768 80" MAS_FUSED_AHEAD_SLABS=64 timeout 60 ./new/loop 40 >>"$A" 2>&1
  else MAS_LOOP_SHAPES="8 4096 32768 80" timeout 60 ./old/loop 40 >>"$A" 2>&1; fi
done
echo "done: $((SECONDS - t0)) s" >>"$L"
