#!/usr/bin/env bash
# Session 38's first call: old (main before session 37, eea714f) against new (main +
# bench/lab/ahead_few_slabs.patch: the tiles-ahead kernel only for items of at most 4 slabs) and
# new2 (new + bench/lab/coef_one_pass.patch: Glow-TTS's coefficients in one pass, +
# bench/lab/coef_split.patch: the exp chains' ordinary cases in one block, MAS_COEF_IL 1 and 2
# dimensions a thread), then the coefficient kernel lab (bench/lab/coef_lab.cu, linked to old's
# library), all prebuilt here:
#   rm -rf build-prebuilt && PATCHES=bench/lab/ahead_few_slabs.patch \
#     PATCHES2="bench/lab/ahead_few_slabs.patch bench/lab/coef_one_pass.patch bench/lab/coef_split.patch" \
#     bash bench/lab/prebuilt_ab.sh eea714f
#   nvcc -std=c++17 -O3 -arch=sm_90 -Iinclude -Ilib -Itests/c -Itests/cuda -Ibench/lab bench/lab/coef_lab.cu \
#     -cudart shared -Xlinker --allow-shlib-undefined -Xlinker -rpath='$ORIGIN/old' \
#     -Lbuild-prebuilt/old -lmas -o build-prebuilt/coef_lab
# Device: run(carry=["build-prebuilt", "bench/lab/session38_run.sh"],
#             command="bash bench/lab/session38_run.sh")   (150 s; run once, session 38)
# Output: $OUT/ab.log (three rounds, four shapes; the likelihood rows once), $OUT/tests.log,
# $OUT/coef_lab.log (the variants' bits and us a launch).
. "$(dirname "$0")/lab_run_common.sh" # build-prebuilt/, t0, $L, $A, ab_rounds
echo "=== coef_lab" >"$OUT/coef_lab.log"
timeout 60 ./coef_lab >>"$OUT/coef_lab.log" 2>&1
echo "coef_lab rc=$? $((SECONDS - t0)) s" >>"$L"
export MAS_LOOP_SHAPES="32 150 800 80;32 512 2048 80;16 1024 4096 80;8 4096 32768 80"
for k in 1 2 3; do
  for v in old new; do echo "=== $v, round $k" >>"$A"; timeout 60 "./$v/loop" 40 >>"$A" 2>&1; done
  for il in 1 2; do
    echo "=== new2 il=$il, round $k" >>"$A"; MAS_COEF_IL=$il timeout 60 ./new2/loop 40 >>"$A" 2>&1
  done
done
for k in 1; do for v in old new2; do for il in 1 2; do
  [ $v = old ] && [ $il = 2 ] && continue
  echo "=== likelihood, $v il=$il, round $k" >>"$A"
  MAS_COEF_IL=$il timeout 60 "./$v/bench_lik" --quick 2>&1 | grep -E "^\|" >>"$A"
done; done; done
echo "ab: $((SECONDS - t0)) s" >>"$L"
# new2 holds new's change too: its tests cover both (the full set at il=1, the short one at 2)
for il in 1 2; do
  small=""; [ $il = 2 ] && small=--small
  echo "new2/test_fused_cuda $small il=$il" >>"$L"
  MAS_COEF_IL=$il timeout 200 ./new2/test_fused_cuda $small 2>&1 | grep -E 'FAIL|checks' | tail -8 >>"$L"
  echo "new2/test_likelihood_cuda il=$il" >>"$L"
  MAS_COEF_IL=$il timeout 150 ./new2/test_likelihood_cuda 2>&1 | tail -2 >>"$L"
  echo "tests: $((SECONDS - t0)) s" >>"$L"
done
echo "memcheck new2/test_likelihood_cuda --small il=2" >>"$L"
MAS_COEF_IL=2 timeout 60 compute-sanitizer --tool memcheck --print-limit 3 ./new2/test_likelihood_cuda --small 2>&1 | tail -3 >>"$L"
echo "done: $((SECONDS - t0)) s" >>"$L"
