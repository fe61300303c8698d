#!/usr/bin/env bash
# One device call for bench/lab/fused_stamps.patch (see its header): a copy
# of the working tree in /tmp with the patch applied (the tree itself is not
# touched), libmas.a built there, the driver compiled against it, then the
# stamps at B=32 T=150 S=800, B=32 T=512 S=2048 and B=16 T=1024 S=4096 in both
# precisions. PATCHES: the patches to apply in order instead (e.g. a lab form
# and its stamps: bench/lab/fused_tile_pipe_stamps.patch); DRIVER: another
# driver (e.g. bench/lab/backtrack_timeline.cu with its patch); SHAPES: "B T
# S;..." instead of the three above.
# Device: run(command="bash bench/lab/fused_stamps.sh")   Output: $OUT/stamps.log
set -u -o pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/cuda/bin"
LOG=${OUT:-/tmp}/stamps.log
SRC=/tmp/stamps_src B=/tmp/stamps_build
t0=$SECONDS
rm -rf "$SRC" && mkdir -p "$SRC" && cp -r include lib python tests CMakeLists.txt bench "$SRC"/ &&
  (cd "$SRC" && for p in ${PATCHES:-bench/lab/fused_stamps.patch}; do git apply "$p" || exit 1; done) ||
  { echo "patch failed" >"$LOG"; exit 1; }
. bench/gpu_build.sh
gpu_build "$SRC" "$B" "$(nproc)" "$B.log" mas >"$LOG" 2>&1 # its pkg step fails without _C: libmas.a is built
[ -f "$B/libmas.a" ] || { tail -30 "$B.log" >>"$LOG"; exit 1; }
nvcc -std=c++17 -O2 -arch=sm_"${MAS_CUDA_ARCH:-90}" -I"$SRC/include" -I"$SRC/tests/cuda" "$SRC/${DRIVER:-bench/lab/fused_stamps.cu}" \
  "$B/libmas.a" -lm -lpthread -o "$B/fused_stamps" >>"$LOG" 2>&1 || exit 1
echo "build: $((SECONDS - t0)) s" >>"$LOG"
IFS=';' read -ra shapes <<<"${SHAPES:-32 150 800;32 512 2048;16 1024 4096}"
for shape in "${shapes[@]}"; do
  timeout 120 "$B/fused_stamps" $shape >>"$LOG" 2>&1
done
echo "done: $((SECONDS - t0)) s" >>"$LOG"
