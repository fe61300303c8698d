#!/usr/bin/env bash
# Session 37's call: the later slabs' last tiles made ahead of their sweep and parked in the
# item's coefficient rows (new: the working tree, fused_forward.cuh's AheadPolicy) against main
# (old), both prebuilt here:
#   rm -rf build-prebuilt/new* && KEEP=1 PATCHES2=bench/lab/ahead_piece_pool.patch \
#     bash bench/lab/prebuilt_ab.sh eea714f   (old: main before session 37 landed it)
# (new2, when built: the pool in 64-row slots across the slabs' rows, 10 at J=80 against 8)
# Device: run(carry=["build-prebuilt", "bench/lab/ahead_run.sh"],
#             command="bash bench/lab/ahead_run.sh")                        (~5 min)
# A guard run first (a wrong hand-over hangs: 30 s timeout), then three rounds of old and of
# new at four policies (MAS_FUSED_AHEAD="lag16 base16 cost16"; "0 0 0": nothing ahead, the
# code's own cost); the tests (full set at the default policy, the short set at an eager
# one that parks the most); memcheck and racecheck of the short set at the eager policy.
# Output: $OUT/ab.log, $OUT/tests.log.
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A, ab_rounds
eager="80 0 10"
echo "=== guard: new once, default and eager" >>"$A"
timeout 30 ./new/loop 5 >>"$A" 2>&1; guard=$?
MAS_FUSED_AHEAD="$eager" timeout 30 ./new/loop 5 >>"$A" 2>&1; guard=$((guard + $?))
echo "guard rc=$guard $((SECONDS - t0)) s" >>"$L"
policies='"0 0 0" "36 21 17" "36 17 17" "36 3 17"'
[ $guard = 0 ] || { echo "guard failed: only the off policy timed" >>"$L"; policies='"0 0 0"'; }
for k in 1 2 3; do
  echo "=== old, round $k" >>"$A"; timeout 60 ./old/loop 40 >>"$A" 2>&1
  eval "set -- $policies"
  for v in new new2; do
    [ -x "./$v/loop" ] || continue
    for p in "$@"; do
      echo "=== $v ahead=$p, round $k" >>"$A"; MAS_FUSED_AHEAD="$p" timeout 60 "./$v/loop" 40 >>"$A" 2>&1
    done
  done
done
echo "ab: $((SECONDS - t0)) s" >>"$L"
echo "new/test_fused_cuda (default policy)" >>"$L"
timeout 200 ./new/test_fused_cuda 2>&1 | grep -E 'FAIL|checks' | tail -8 >>"$L"
echo "new/test_fused_cuda --small (eager $eager)" >>"$L"
MAS_FUSED_AHEAD="$eager" timeout 100 ./new/test_fused_cuda --small 2>&1 | tail -3 >>"$L"
echo "tests: $((SECONDS - t0)) s" >>"$L"
for tool in memcheck racecheck; do
  echo "$tool new/test_fused_cuda --small (eager)" >>"$L"
  MAS_FUSED_AHEAD="$eager" timeout 120 compute-sanitizer --tool $tool --print-limit 3 \
    ./new/test_fused_cuda --small 2>&1 | grep -v "^align_gaussian workspace" | tail -40 >>"$L"
done
echo "done: $((SECONDS - t0)) s" >>"$L"
