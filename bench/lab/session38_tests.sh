#!/usr/bin/env bash
# Session 38's second call: the tests of new (main + bench/lab/ahead_few_slabs.patch, prebuilt
# by bench/lab/prebuilt_ab.sh as in session38_run.sh) alone, without the coefficient patches
# whose split form failed a case of the full set in the first call (new2).
# Device: run(carry=["build-prebuilt", "bench/lab/session38_tests.sh"],
#             command="bash bench/lab/session38_tests.sh")                (~2 min)
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A, ab_rounds
echo "new/test_fused_cuda" >>"$L"
timeout 120 ./new/test_fused_cuda 2>&1 | grep -E 'FAIL|checks' | tail -8 >>"$L"
echo "tests: $((SECONDS - t0)) s" >>"$L"
for tool in memcheck racecheck; do
  echo "$tool new/test_fused_cuda --small" >>"$L"
  timeout 90 compute-sanitizer --tool $tool --print-limit 3 ./new/test_fused_cuda --small 2>&1 | tail -3 >>"$L"
  echo "$tool: $((SECONDS - t0)) s" >>"$L"
done
echo "done: $((SECONDS - t0)) s" >>"$L"
