#!/usr/bin/env bash
# Issue 14 on a GPU machine: replays the fuzz corpus through the CUDA entry
# points (tests/fuzz/replay_cuda.cu) under compute-sanitizer memcheck.
#   bench/gpu_fuzz_replay.sh [--max-files N] [--no-sanitize]
# Builds libmas with CUDA (build-gpu-fuzz/), the fuzz targets' decoders with
# -DFZ_REPLAY (plain gcc, no libFuzzer), writes the seed corpus when missing
# (tests/fuzz/make_corpus.py; a grown corpus is used as it is), and exits
# non-zero on any memcheck error, CUDA error or CPU/CUDA mismatch. N caps
# the files per target (default 300: well under 3 minutes under memcheck).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
MAX=300 SANITIZE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --max-files) MAX=$2; shift ;;
    --no-sanitize) SANITIZE= ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
BUILD=${MAS_GPU_BUILD:-build-gpu-fuzz}
ARCH=${MAS_CUDA_ARCH:-90}
cmake -S . -B "$BUILD" -DMAS_CUDA=ON -DMAS_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >/dev/null
cmake --build "$BUILD" --target mas -j"${JOBS:-8}" >/dev/null
mkdir -p "$BUILD/replay"
objs=()
for t in hard forward_sum attention_forward attention_backward likelihood topology; do
  gcc -std=c11 -O1 -g -Wall -Wextra -Wno-maybe-uninitialized -Werror -DFZ_REPLAY -DLLVMFuzzerTestOneInput="fz_run_$t" \
    -Iinclude -Ilib -Itests/fuzz -c "tests/fuzz/fuzz_$t.c" -o "$BUILD/replay/fuzz_$t.o"
  objs+=("$BUILD/replay/fuzz_$t.o")
done
nvcc -std=c++17 -O1 -g -arch=sm_"$ARCH" -Iinclude -Ilib -Itests/fuzz tests/fuzz/replay_cuda.cu \
  "${objs[@]}" "$BUILD/libmas.a" -lm -lpthread -o "$BUILD/replay/replay_cuda"
[ -d tests/fuzz/corpus/fuzz_likelihood ] || python3 tests/fuzz/make_corpus.py
if [ -n "$SANITIZE" ]; then
  compute-sanitizer --tool memcheck --error-exitcode 3 --print-limit 20 \
    "$BUILD/replay/replay_cuda" --max-files "$MAX" tests/fuzz/corpus
else
  "$BUILD/replay/replay_cuda" --max-files "$MAX" tests/fuzz/corpus
fi
echo "gpu_fuzz_replay: OK"
