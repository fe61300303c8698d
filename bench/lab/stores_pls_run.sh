#!/usr/bin/env bash
# Session 35's one device call (results/fused-gpu-h100.md "Session 35"), kept as run:
# build-prebuilt/ with the sides old (main), stores (+ bench/lab/cell_stores16.patch), pls
# (stores + bench/lab/progressive_last_stage.patch) and new (+ bench/lab/cluster_help.patch),
# made with bench/lab/prebuilt_ab.sh (PATCHES2 for a third side, renamed after each build).
# Device: run(carry=["build-prebuilt", "bench/lab/stores_pls_run.sh"],
#             command="bash bench/lab/stores_pls_run.sh")                 (~260 s)
# Three rounds of old / stores / pls, their tests and sanitizers, a T=150 D sweep (needs a
# fused_loop built with MAS_LOOP_SHAPES: the old side's of that call was not), then the help
# lab's host choice, one round of it and its first racecheck hazards.
# Output: $OUT/ab.log, tests.log, dsweep.log, help.log.
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A, ab_rounds
D=$OUT/dsweep.log H=$OUT/help.log
head -1 "$L" >"$D"
ab_rounds 3 old stores pls
echo "ab: $((SECONDS - t0)) s" >>"$L"
echo "stores/test_fused_cuda (full)" >>"$L"; timeout 150 ./stores/test_fused_cuda 2>&1 | tail -2 >>"$L"
echo "pls/test_fused_cuda --small" >>"$L"; timeout 100 ./pls/test_fused_cuda --small 2>&1 | tail -2 >>"$L"
for v in stores pls; do for tool in memcheck racecheck; do
  echo "$tool $v/test_fused_cuda --small" >>"$L"
  timeout 100 compute-sanitizer --tool $tool ./$v/test_fused_cuda --small 2>&1 | tail -2 >>"$L"
done; done
echo "tests: $((SECONDS - t0)) s" >>"$L"
echo "=== old, D sweep" >>"$D"
MAS_LOOP_SHAPES="32 150 800 80;32 150 800 48;32 150 800 24;32 150 800 4;32 192 800 80;32 128 800 80" timeout 90 ./old/loop 40 >>"$D" 2>&1
echo "dsweep: $((SECONDS - t0)) s" >>"$L"
MAS_FUSED_HELP="3 3" MAS_FUSED_HELP_VERBOSE=1 timeout 30 ./new/loop 1 2>&1 | grep "^help:" | sort -u >>"$H"
for h in "3 3" "2 0"; do echo "=== new help=$h" >>"$H"; MAS_FUSED_HELP="$h" timeout 40 ./new/loop 40 >>"$H" 2>&1; done
echo "help: $((SECONDS - t0)) s" >>"$L"
MAS_FUSED_HELP="3 3" timeout 100 compute-sanitizer --tool racecheck --print-limit 4 ./new/test_fused_cuda --small 2>&1 | grep -v "^=========     #" | head -60 >>"$H"
echo "done: $((SECONDS - t0)) s" >>"$L"
