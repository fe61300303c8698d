#!/usr/bin/env bash
# Variants of the topology round sweep on the GPU machine, each built apart
# from the tree (libmas only) and timed with `test_topology_cuda 1 --bench`:
# chunks of 8 and 32 frames (MAS_ROUND_FRAMES), and with PATCH=file a patch
# applied to a copy of the tree (e.g. the soft forward on the block sweep).
#   bench/topo_round_variants.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/cuda/bin
variant() { # name, source dir, extra CUDA flags
  local name=$1 src=$2 flags=$3 out=/tmp/topo-variant-$1
  cmake -S "$src" -B "$out" -DMAS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_FLAGS="$flags" >/dev/null && cmake --build "$out" -j"$(nproc)" --target mas >/dev/null 2>&1 &&
    nvcc -std=c++17 -O2 -arch=sm_90 -I"$src/include" -I"$src/lib" -I"$src/tests/c" \
      "$src/tests/cuda/test_topology_cuda.cu" "$out/libmas.a" -lm -lpthread -o "$out/tt" &&
    echo "== $name" && "$out/tt" 1 --bench | grep bench
}
for C in 8 32; do variant "round-frames-$C" "$PWD" "-DMAS_ROUND_FRAMES=$C"; done
if [ -n "${PATCH:-}" ]; then
  rm -rf /tmp/topo-variant-src && mkdir -p /tmp/topo-variant-src &&
    tar --exclude=./build* --exclude=./tests/fuzz/corpus -cf - . | tar -xf - -C /tmp/topo-variant-src &&
    (cd /tmp/topo-variant-src && patch -p1 -s <"$OLDPWD/$PATCH") &&
    variant "$(basename "$PATCH" .patch)" /tmp/topo-variant-src ""
fi
