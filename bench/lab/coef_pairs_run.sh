#!/usr/bin/env bash
# Session 36's call: the cluster help in pairs of slabs (new: bench/lab/cluster_help.patch,
# MAS_FUSED_HELP_PAIRS=1) and the coefficient kernel's shorter instruction stream (new2:
# bench/lab/coef_instructions.patch, which was the working tree when built), both against main
# (old), all prebuilt here:
#   KEEP=1 PATCHES=bench/lab/cluster_help.patch bash bench/lab/prebuilt_ab.sh HEAD
#   KEEP=1 PATCHES2=bench/lab/coef_instructions.patch bash bench/lab/prebuilt_ab.sh HEAD
# Measured once (session 36): results/fused-gpu-h100.md "Session 36", call 1.
# Device: run(carry=["build-prebuilt", "bench/lab/coef_pairs_run.sh"],
#             command="bash bench/lab/coef_pairs_run.sh")                 (~4 min)
# A guard run of the pairs first (a wrong hand-over hangs: 30 s timeout), then three rounds
# of old, new at four help settings and new2; the likelihood rows of old and new2; the tests;
# the coefficient kernels' time and instructions under ncu; the sanitizers.
# Output: $OUT/ab.log, $OUT/tests.log, $OUT/coef_ncu.log.
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A, ab_rounds
export MAS_FUSED_HELP_PAIRS=1
echo "=== guard: new pairs (3 3) once" >>"$A"
MAS_FUSED_HELP="3 3" timeout 30 ./new/loop 5 >>"$A" 2>&1; guard=$?
echo "guard rc=$guard $((SECONDS - t0)) s" >>"$L"
MAS_FUSED_HELP="3 3" MAS_FUSED_HELP_VERBOSE=1 timeout 30 ./new/loop 1 2>&1 | grep "^help:" | sort -u >>"$L"
helps='"3 3" "2 2" "3 0" "0 3"'
[ $guard = 0 ] || { echo "guard failed: pairs left out" >>"$L"; helps=""; }
for k in 1 2 3; do
  echo "=== old, round $k" >>"$A"; timeout 60 ./old/loop 40 >>"$A" 2>&1
  eval "set -- $helps"
  for h in "$@"; do
    echo "=== new pairs help=$h, round $k" >>"$A"; MAS_FUSED_HELP="$h" timeout 60 ./new/loop 40 >>"$A" 2>&1
  done
  echo "=== new2, round $k" >>"$A"; timeout 60 ./new2/loop 40 >>"$A" 2>&1
done
for k in 1 2; do for v in old new2; do
  echo "=== likelihood, $v, round $k" >>"$A"
  timeout 60 "./$v/bench_lik" --quick 2>&1 | grep -E "^\|" >>"$A"
done; done
echo "ab: $((SECONDS - t0)) s" >>"$L"
# new's coefficient kernel is main's (the patch leaves likelihood.cu alone); old's loop predates
# MAS_LOOP_SHAPES
for v in new new2; do
  echo "=== ncu coefficients, $v (B=32 T=512, then T=150)" >>"$OUT/coef_ncu.log"
  for sh in "32 512 2048 80" "32 150 800 80"; do
    MAS_FUSED_HELP="0 0" MAS_LOOP_SHAPES="$sh" timeout 60 ncu -k regex:gauss_coef -c 3 --metrics \
      gpu__time_duration.sum,smsp__inst_executed.sum,sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active \
      "./$v/loop" 1 2>&1 | grep -E "gauss_coef|duration|inst_executed|issue_active|pipe_fp64" >>"$OUT/coef_ncu.log"
  done
done
echo "ncu: $((SECONDS - t0)) s" >>"$L"
if [ $guard = 0 ]; then
  echo "new/test_fused_cuda pairs 3 3" >>"$L"
  MAS_FUSED_HELP="3 3" timeout 150 ./new/test_fused_cuda 2>&1 | tail -2 >>"$L"
fi
for t in test_fused_cuda test_likelihood_cuda; do
  echo "new2/$t" >>"$L"; timeout 150 "./new2/$t" 2>&1 | tail -2 >>"$L"
done
echo "tests: $((SECONDS - t0)) s" >>"$L"
for tool in memcheck racecheck; do
  echo "$tool new2/test_likelihood_cuda --small" >>"$L"
  timeout 100 compute-sanitizer --tool $tool ./new2/test_likelihood_cuda --small 2>&1 | tail -2 >>"$L"
  if [ $guard = 0 ]; then
    echo "$tool new/test_fused_cuda --small pairs 3 3" >>"$L"
    MAS_FUSED_HELP="3 3" timeout 120 compute-sanitizer --tool $tool --print-limit 3 ./new/test_fused_cuda --small 2>&1 | tail -30 >>"$L"
  fi
done
echo "done: $((SECONDS - t0)) s" >>"$L"
