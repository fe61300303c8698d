#!/usr/bin/env bash
# Everything a change needs on the GPU machine in one call, with one build:
# libmas + the Python module (CMake, -DSKBUILD=ON, no pip), then in order of
# importance, each step logged to $OUT (or build-gpu-one/logs) as it ends:
#   1. test_topology_cuda --small   (CUDA topologies against the CPU)
#   2. the fuzz corpus through the CUDA entry points under memcheck
#      (tests/fuzz/replay_cuda.cu; --max-files $REPLAY_FILES per target)
#   3. pytest of the GPU-relevant Python files ($PYTESTS) on the built module
# Usage: bench/gpu_one_call.sh      Exit: non-zero when a step failed.
set -u -o pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
R=$PWD
B=${MAS_GPU_BUILD:-build-gpu-one}
LOGS=${OUT:-$B/logs}
ARCH=${MAS_CUDA_ARCH:-90}
mkdir -p "$LOGS" "$B/replay"
fail=0
step() { echo "=== $1 ($(date +%T)) ===" | tee -a "$LOGS/summary.log"; }

step "build: libmas (CUDA) and the Python module"
t0=$SECONDS
cmake -S . -B "$B" -DSKBUILD=ON -DMAS_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DPython_EXECUTABLE="$(command -v python3)" \
  >"$LOGS/cmake.log" 2>&1 &&
  cmake --build "$B" -j"$(nproc)" >>"$LOGS/cmake.log" 2>&1 ||
  { tail -40 "$LOGS/cmake.log"; exit 1; }
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
nvcc -std=c++17 -O2 -arch=sm_"$ARCH" -Iinclude -Ilib -Itests/c tests/cuda/test_topology_cuda.cu \
  "$LIB" -lm -lpthread -o "$B/test_topology_cuda" >"$LOGS/nvcc_test.log" 2>&1 &
wait
nvcc -std=c++17 -O1 -g -arch=sm_"$ARCH" -Iinclude -Ilib -Itests/fuzz tests/fuzz/replay_cuda.cu \
  "${objs[@]}" "$LIB" -lm -lpthread -o "$B/replay/replay_cuda" >"$LOGS/nvcc_replay.log" 2>&1 ||
  { cat "$LOGS/nvcc_replay.log"; fail=1; }

step "1. test_topology_cuda --small"
if [ -x "$B/test_topology_cuda" ]; then
  timeout 120 "$B/test_topology_cuda" --small >"$LOGS/test_topology_cuda.log" 2>&1 || fail=1
  tail -4 "$LOGS/test_topology_cuda.log" | tee -a "$LOGS/summary.log"
else
  cat "$LOGS/nvcc_test.log"; fail=1
fi

step "2. fuzz corpus replay under compute-sanitizer memcheck"
[ -d tests/fuzz/corpus/fuzz_topology ] || python3 tests/fuzz/make_corpus.py >/dev/null
if [ -x "$B/replay/replay_cuda" ]; then
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 --print-limit 20 \
    "$B/replay/replay_cuda" --max-files "${REPLAY_FILES:-64}" tests/fuzz/corpus \
    >"$LOGS/replay.log" 2>&1 || fail=1
  grep -E "^fuzz_|mismatch|ERROR SUMMARY|CUDA error" "$LOGS/replay.log" | head -40 |
    tee -a "$LOGS/summary.log"
fi

step "3. pytest on the built module"
PKG=$B/pkg
rm -rf "$PKG" && mkdir -p "$PKG" && cp -r python/libmas "$PKG/" &&
  cp "$B"/_C*.so "$PKG/libmas/" 2>/dev/null
files=()
for f in ${PYTESTS:-tests/python/test_fused.py tests/python/test_longform.py tests/python/test_topology_cuda.py}; do
  files+=("$R/$f")
done
(cd /tmp && PYTHONPATH="$R/$PKG" timeout 200 python3 -m pytest -q -x -p no:cacheprovider \
  "${files[@]}") >"$LOGS/pytest.log" 2>&1 || fail=1
tail -6 "$LOGS/pytest.log" | tee -a "$LOGS/summary.log"
step "done, status $fail"
exit $fail
