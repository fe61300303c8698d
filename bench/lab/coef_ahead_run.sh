#!/usr/bin/env bash
# The plain float32 coefficient kernel loading a whole pass's dimensions before computing
# (new2: bench/lab/coef_ahead.patch) against main (old), prebuilt here:
#   KEEP=1 PATCHES2=bench/lab/coef_ahead.patch bash bench/lab/prebuilt_ab.sh HEAD
# Device: run(carry=["build-prebuilt", "bench/lab/coef_ahead_run.sh"],
#             command="bash bench/lab/coef_ahead_run.sh")                 (~2 min)
# Three rounds of old / new2, the likelihood rows, ncu of the coefficient kernels, the tests.
# Output: $OUT/ab.log, $OUT/tests.log, $OUT/coef_ncu.log.
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A, ab_rounds
ab_rounds 3 old new2
for k in 1 2; do for v in old new2; do
  echo "=== likelihood, $v, round $k" >>"$A"
  timeout 60 "./$v/bench_lik" --quick 2>&1 | grep -E "^\|" >>"$A"
done; done
echo "ab: $((SECONDS - t0)) s" >>"$L"
echo "=== ncu coefficients, new2 (B=32 T=512)" >>"$OUT/coef_ncu.log"
MAS_LOOP_SHAPES="32 512 2048 80" timeout 60 ncu -k regex:gauss_coef -c 3 --metrics \
  gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
  ./new2/loop 1 2>&1 | grep -E "gauss_coef|duration|inst_executed|issue_active" >>"$OUT/coef_ncu.log"
for t in test_fused_cuda test_likelihood_cuda; do
  echo "new2/$t" >>"$L"; timeout 150 "./new2/$t" 2>&1 | tail -2 >>"$L"
done
echo "memcheck new2/test_likelihood_cuda --small" >>"$L"
timeout 100 compute-sanitizer --tool memcheck ./new2/test_likelihood_cuda --small 2>&1 | tail -2 >>"$L"
echo "done: $((SECONDS - t0)) s" >>"$L"
