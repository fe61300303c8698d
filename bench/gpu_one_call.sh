#!/usr/bin/env bash
# Everything a change needs on the GPU machine in one call, with one build:
# libmas + the Python module (CMake, -DSKBUILD=ON, no pip), then in order of
# importance, each step logged to $OUT (or build-gpu-one/logs) as it ends:
#   1. the CUDA test programs $CUDA_TESTS with --small (default
#      test_topology_cuda), then $SANITIZE_TESTS (default none) under
#      compute-sanitizer memcheck and racecheck, then $BENCHES (default none)
#   2. the fuzz corpus through the CUDA entry points under memcheck
#      (tests/fuzz/replay_cuda.cu; --max-files $REPLAY_FILES per target),
#      then again with the hard calls in the long form (--min-workspace)
#   3. pytest of the GPU-relevant Python files ($PYTESTS) on the built module
#   4. with MAS_CALLS=1: `python -m libmas bench --device cuda --calls` and
#      bench/profile_calls.py (host time of each piece of a call)
#   5. with PROFILE_SMALL=1: bench/profile_hard.sh small (ncu of hard_small)
#   6. with TOPO_BENCH=1: test_topology_cuda's full set (seed $SEED) and
#      --bench rows, then `python -m libmas bench --topology --device cuda`
#   8. with LIK_BENCH=1: test_likelihood_cuda's full set (seed $SEED), then
#      `python -m libmas bench --likelihood --device cuda`, then
#      bench/profile_loglik.sh (ncu of a likelihood kernel: WORK=$PROFILE_WORK,
#      gmm by default, or glow; precision $PRECISION, default float32)
#   9. with FUSED_BENCH=1: test_fused_cuda's and test_fused_forward_sum_cuda's
#      full sets (seed $SEED), then
#      `python -m libmas bench --fused --device cuda`, then with
#      FUSED_EXAMPLE="ARGS" examples/glow_tts_step.py --device cuda ARGS
#  10. with PROFILE_FUSED=1: bench/profile_fused.sh for each shape of
#      $FUSED_SHAPES ("B T S;B T S", default "32 512 2048;32 150 800")
#   7. with SPEECH=1: examples/speech/run.py --device cuda $SPEECH_ARGS (the
#      data's manifests and feature caches carried: the machine has no
#      espeak-ng), its report copied to the logs
# CUDA_TESTS="" runs none; REPLAY_FILES=0 skips the replay.
# Usage: bench/gpu_one_call.sh      Exit: non-zero when a step failed.
set -u -o pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
R=$PWD
B=$(realpath -m "${MAS_GPU_BUILD:-build-gpu-one}") # absolute: steps cd elsewhere
LOGS=${OUT:-$B/logs}
ARCH=${MAS_CUDA_ARCH:-90}
mkdir -p "$LOGS" "$B/replay"
fail=0
step() { echo "=== $1 ($(date +%T)) ===" | tee -a "$LOGS/summary.log"; }
# full_set NAME: the CUDA test program NAME's full set (seed $SEED), its
# failures and last lines to the summary
full_set() {
  [ -x "$B/$1" ] || return 0
  timeout "${FULL_TIMEOUT:-300}" "$B/$1" "${SEED:-11}" >"$LOGS/$1_full.log" 2>&1 || fail=1
  grep -E "FAIL|failed" "$LOGS/$1_full.log" | head -20 | tee -a "$LOGS/summary.log"
  tail -3 "$LOGS/$1_full.log" | tee -a "$LOGS/summary.log"
}
# bench_py --WHAT ARGS...: `python -m libmas bench --WHAT ARGS` on the built
# module, logged to bench_WHAT.log, its table to the summary
bench_py() {
  local log="$LOGS/bench_${1#--}.log" # bench_likelihood.log, bench_topology.log
  (cd /tmp && PYTHONPATH="$PKG" timeout 300 python3 -m libmas bench "$@") >"$log" 2>&1 || fail=1
  grep -E "^\||TFLOP|peak" "$log" | tee -a "$LOGS/summary.log"
}

step "build: libmas (CUDA) and the Python module"
t0=$SECONDS
. bench/gpu_build.sh
gpu_build . "$B" "$(nproc)" "$LOGS/cmake.log" || exit 1
echo "build: $((SECONDS - t0)) s" | tee -a "$LOGS/summary.log"
LIB="$B/libmas.a"

# the fuzz decoders (plain gcc) and the two CUDA programs, in parallel
objs=()
for t in hard forward_sum attention_forward attention_backward likelihood topology; do
  gcc -std=c11 -O1 -g -Wall -Wextra -Wno-maybe-uninitialized -Werror -DFZ_REPLAY \
    -DLLVMFuzzerTestOneInput="fz_run_$t" -Iinclude -Ilib -Itests/fuzz \
    -c "tests/fuzz/fuzz_$t.c" -o "$B/replay/fuzz_$t.o" &
  objs+=("$B/replay/fuzz_$t.o")
done
CUDA_TESTS=${CUDA_TESTS-test_topology_cuda}
for t in $CUDA_TESTS ${SANITIZE_TESTS:-} ${BENCHES:-}; do
  nvcc -std=c++17 -O2 -arch=sm_"$ARCH" -Iinclude -Ilib -Itests/c \
    "tests/cuda/$t.cu" "$LIB" -lm -lpthread -o "$B/$t" >"$LOGS/nvcc_$t.log" 2>&1 &
done
wait
nvcc -std=c++17 -O1 -g -arch=sm_"$ARCH" -Iinclude -Ilib -Itests/fuzz tests/fuzz/replay_cuda.cu \
  "${objs[@]}" "$LIB" -lm -lpthread -o "$B/replay/replay_cuda" >"$LOGS/nvcc_replay.log" 2>&1 ||
  { cat "$LOGS/nvcc_replay.log"; fail=1; }

for t in $CUDA_TESTS; do
  step "1. $t --small"
  if [ -x "$B/$t" ]; then
    small="--small"
    [ "$t" = test_soft_cuda ] && small="5 small" # its arguments: seed, then "small"
    timeout 300 stdbuf -oL "$B/$t" $small >"$LOGS/$t.log" 2>&1 || fail=1
    grep -E "FAIL|failed" "$LOGS/$t.log" | head -20 | tee -a "$LOGS/summary.log"
    tail -2 "$LOGS/$t.log" | tee -a "$LOGS/summary.log"
  else
    cat "$LOGS/nvcc_$t.log"; fail=1
  fi
done
for t in ${BENCHES:-}; do
  step "1b. $t"
  timeout 300 "$B/$t" ${BENCH_ARGS:-} >"$LOGS/$t.log" 2>&1 || fail=1
  grep -E "^\|" "$LOGS/$t.log" | tee -a "$LOGS/summary.log"
done

. bench/racecheck_ok.sh
for t in ${SANITIZE_TESTS:-}; do
  for tool in memcheck racecheck; do
    step "1c. compute-sanitizer --tool $tool $t 7 --small"
    log="$LOGS/sanitize-$tool-$t.log"
    timeout 400 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 1000000 "$B/$t" 7 \
      --small >"$log" 2>&1; rc=$?
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|checks" "$log" | tail -3 | tee -a "$LOGS/summary.log"
    if [ $tool = racecheck ] && [ $rc -eq 9 ]; then
      racecheck_ok "$log" > "$LOGS/racecheck-$t.txt" && rc=0
      tee -a "$LOGS/summary.log" < "$LOGS/racecheck-$t.txt"
    fi
    [ $rc -eq 0 ] || fail=1
  done
done
step "2. fuzz corpus replay under compute-sanitizer memcheck"
if [ "${REPLAY_FILES:-64}" != 0 ] && [ -x "$B/replay/replay_cuda" ]; then
  [ -d tests/fuzz/corpus/fuzz_topology ] || python3 tests/fuzz/make_corpus.py >/dev/null
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 --print-limit 20 \
    "$B/replay/replay_cuda" --max-files "${REPLAY_FILES:-64}" tests/fuzz/corpus \
    >"$LOGS/replay.log" 2>&1 || fail=1
  grep -E "^fuzz_|mismatch|ERROR SUMMARY|CUDA error" "$LOGS/replay.log" | head -40 |
    tee -a "$LOGS/summary.log"
  step "2b. the same with the hard calls in the long form (--min-workspace)"
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 --print-limit 20 \
    "$B/replay/replay_cuda" --max-files "${REPLAY_FILES:-64}" --min-workspace tests/fuzz/corpus \
    >"$LOGS/replay-min.log" 2>&1 || fail=1
  grep -E "^fuzz_(hard|topology)|mismatch|ERROR SUMMARY|CUDA error" "$LOGS/replay-min.log" |
    head -20 | tee -a "$LOGS/summary.log"
fi

step "3. pytest on the built module"
PKG=$B/pkg # made by gpu_build
files=()
for f in ${PYTESTS:-tests/python/test_fused.py tests/python/test_longform.py tests/python/test_topology_cuda.py}; do
  files+=("$R/$f")
done
(cd /tmp && LIBMAS_EXPECT_GLUE=${LIBMAS_EXPECT_GLUE:-1} PYTHONPATH="$PKG" timeout 200 python3 -m pytest -q -x -p no:cacheprovider \
  "${files[@]}") >"$LOGS/pytest.log" 2>&1 || fail=1
if grep -q "failed" "$LOGS/pytest.log"; then
  grep -E "^E |^[^ ]*\.py:[0-9]+: |^FAILED|seed" "$LOGS/pytest.log" | head -40 | tee -a "$LOGS/summary.log"
fi
tail -3 "$LOGS/pytest.log" | tee -a "$LOGS/summary.log"
if [ "${MAS_CALLS:-0}" = 1 ]; then
  step "4. bench --calls and profile_calls"
  (cd /tmp && PYTHONPATH="$PKG" timeout 300 python3 -m libmas bench --device cuda --calls) \
    >"$LOGS/calls.log" 2>&1 || fail=1
  grep -E "^\|" "$LOGS/calls.log" | tee -a "$LOGS/summary.log"
  (cd /tmp && PYTHONPATH="$PKG" timeout 120 python3 "$R/bench/profile_calls.py" --calls 1000) \
    >"$LOGS/profile_calls.log" 2>&1 || fail=1
fi
if [ "${TOPO_BENCH:-0}" = 1 ]; then
  step "6. test_topology_cuda (full set), its --bench rows, bench --topology"
  full_set test_topology_cuda
  if [ -x "$B/test_topology_cuda" ]; then
    timeout 120 "$B/test_topology_cuda" 1 --bench >"$LOGS/topo_bench.log" 2>&1 || fail=1
    tail -12 "$LOGS/topo_bench.log" | tee -a "$LOGS/summary.log"
  fi
  bench_py --topology --device cuda
fi
if [ "${PROFILE_SMALL:-0}" = 1 ]; then
  step "5. ncu of hard_small (bench/profile_hard.sh small)"
  nvcc -std=c++17 -O2 -lineinfo -arch=sm_"$ARCH" -Iinclude -Ilib -Itests/c tests/cuda/bench_hard_cuda.cu \
    "$LIB" -lm -lpthread -o "$B/bench_hard_cuda" >"$LOGS/nvcc_bench_profile.log" 2>&1 &&
    OUT="$LOGS/profile" bash bench/profile_hard.sh "$B" small 2>&1 | tee -a "$LOGS/summary.log" || fail=1
fi
if [ "${LIK_BENCH:-0}" = 1 ]; then
  step "8. test_likelihood_cuda (full set), bench --likelihood, profile_loglik.sh"
  full_set test_likelihood_cuda
  bench_py --likelihood --device cuda
  WORK=${PROFILE_WORK:-gmm} timeout 300 bash bench/profile_loglik.sh "$B" >"$LOGS/profile_loglik.log" 2>&1 || fail=1
  tail -45 "$LOGS/profile_loglik.log" >>"$LOGS/summary.log"
fi
if [ "${FUSED_BENCH:-0}" = 1 ]; then
  step "9. test_fused_cuda and test_fused_forward_sum_cuda (full sets), bench --fused"
  full_set test_fused_cuda
  full_set test_fused_forward_sum_cuda
  bench_py --fused --device cuda
  if [ -n "${FUSED_EXAMPLE:-}" ]; then
    (cd /tmp && PYTHONPATH="$PKG" timeout 200 python3 "$R/examples/glow_tts_step.py" \
      --device cuda $FUSED_EXAMPLE) >"$LOGS/glow_tts_step.log" 2>&1 || fail=1
    grep -E "^\||same|Glow" "$LOGS/glow_tts_step.log" | tee -a "$LOGS/summary.log"
  fi
fi
if [ "${PROFILE_FUSED:-0}" = 1 ]; then
  IFS=';' read -ra shapes <<<"${FUSED_SHAPES:-32 512 2048;32 150 800}"
  for sh in "${shapes[@]}"; do
    step "10. ncu of fused_forward at B T S = $sh (bench/profile_fused.sh)"
    SHAPE="$sh" timeout 300 bash bench/profile_fused.sh "$B" >"$LOGS/profile_fused_${sh// /_}.log" 2>&1 || fail=1
    head -20 "$LOGS/profile_fused_${sh// /_}.log" >>"$LOGS/summary.log"
  done
fi
if [ "${SPEECH:-0}" = 1 ]; then
  step "7. the speech example on the GPU"
  PYTHONPATH="$PKG" timeout 540 python3 examples/speech/run.py --device cuda --no-plots \
    --out "$LOGS/speech" ${SPEECH_ARGS:-} >"$LOGS/speech.log" 2>&1 || fail=1
  grep -E "^\||training utterances|dropped|Error|error" "$LOGS/speech.log" | tee -a "$LOGS/summary.log"
fi
step "done, status $fail"
exit $fail
