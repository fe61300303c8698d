#!/usr/bin/env bash
# The check of bench/lab/ahead_few_slabs.patch (session 37, not yet run: no device time left):
# the kernel that makes the later slabs' last tiles ahead taken only for items of at most 4
# slabs of 128 tokens; old (main before session 37, eea714f) against new (main + the patch):
#   rm -rf build-prebuilt && PATCHES=bench/lab/ahead_few_slabs.patch \
#     bash bench/lab/prebuilt_ab.sh eea714f
# Device: run(carry=["build-prebuilt", "bench/lab/ahead_final_run.sh"],
#             command="bash bench/lab/ahead_final_run.sh")                  (~3 min)
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A, ab_rounds
export MAS_LOOP_SHAPES="32 150 800 80;32 512 2048 80;16 1024 4096 80;8 4096 32768 80"
ab_rounds 3 old new
echo "ab: $((SECONDS - t0)) s" >>"$L"
echo "new/test_fused_cuda" >>"$L"
timeout 200 ./new/test_fused_cuda 2>&1 | grep -E 'FAIL|checks' | tail -8 >>"$L"
echo "done: $((SECONDS - t0)) s" >>"$L"
