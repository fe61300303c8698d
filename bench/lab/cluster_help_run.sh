#!/usr/bin/env bash
# The cluster-help lab (bench/lab/cluster_help.patch) against main, both prebuilt here:
#   KEEP=1 PATCHES=bench/lab/cluster_help.patch bash bench/lab/prebuilt_ab.sh HEAD
# Device: run(carry=["build-prebuilt", "bench/lab/cluster_help_run.sh"],
#             command="bash bench/lab/cluster_help_run.sh")          (~130 s, session 34)
# A guard run first (a wrong hand-over hangs: 30 s timeout), the host's choice a shape
# (MAS_FUSED_HELP_VERBOSE), then three rounds of old and of new at five help settings, the
# new side's test_fused_cuda full set, memcheck and racecheck (first hazards) with "3 3".
# Output: $OUT/ab.log, $OUT/tests.log.
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A, ab_rounds
echo "=== guard: new (3 3) once" >>"$A"
MAS_FUSED_HELP="3 3" timeout 30 ./new/loop 5 >>"$A" 2>&1; rc=$?
echo "guard rc=$rc $((SECONDS - t0)) s" >>"$L"
MAS_FUSED_HELP="3 3" MAS_FUSED_HELP_VERBOSE=1 timeout 30 ./new/loop 1 2>&1 | grep "^help:" | sort -u >>"$L"
[ $rc = 0 ] || { echo "guard failed" >>"$L"; MAS_FUSED_HELP="3 3" timeout 60 ./new/test_fused_cuda --small 2>&1 | tail -5 >>"$L"; exit 1; }
for k in 1 2 3; do
  echo "=== old, round $k" >>"$A"; timeout 60 ./old/loop 40 >>"$A" 2>&1
  for h in "3 3" "2 2" "3 0" "0 3" "0 0"; do
    echo "=== new help=$h, round $k" >>"$A"; MAS_FUSED_HELP="$h" timeout 60 ./new/loop 40 >>"$A" 2>&1
  done
done
echo "ab: $((SECONDS - t0)) s" >>"$L"
echo "new/test_fused_cuda help=3 3" >>"$L"
MAS_FUSED_HELP="3 3" timeout 150 ./new/test_fused_cuda 2>&1 | tail -3 >>"$L"
echo "tests: $((SECONDS - t0)) s" >>"$L"
for tool in memcheck racecheck; do
  echo "$tool new/test_fused_cuda --small help=3 3" >>"$L"
  MAS_FUSED_HELP="3 3" timeout 120 compute-sanitizer --tool $tool --print-limit 3 ./new/test_fused_cuda --small 2>&1 | tail -40 >>"$L"
done
echo "done: $((SECONDS - t0)) s" >>"$L"
