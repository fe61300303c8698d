#!/usr/bin/env bash
# Builds here (CPU machine, ~25 min on 2 cores) what bench/lab/pc_run6.sh runs on the device:
# build-prebuilt/old (main), new (fused_pc + whole slab-streams), new2 (the same with the phase
# stamps, and its driver pc_stamps), small/bsp_base and bsp_role (bench_small_phases with main's
# hard_small.cuh and with bench/lab/small_role_barrier.patch). 47 MB: under the 64 MiB carry.
# Then: run(carry=["build-prebuilt"], command="bash bench/lab/pc_run6.sh", kind="nvidia-h100-x1")
set -eu -o pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/cuda/bin"
rm -rf build-prebuilt
PATCHES="bench/lab/fused_pc.patch bench/lab/pc_streams.patch" \
  PATCHES2="bench/lab/fused_pc.patch bench/lab/pc_stamps.patch bench/lab/pc_stamps_streams.patch" \
  bash bench/lab/prebuilt_ab.sh HEAD
rm -f build-prebuilt/products_lab build-prebuilt/new2/test_* build-prebuilt/new2/bench_lik
# the stamps' driver comes with pc_stamps.patch: taken from a copy with it applied
W=/tmp/pc_build6 && rm -rf "$W" && mkdir -p "$W/src" "$W/gv/base/cuda" "$W/gv/role/cuda" build-prebuilt/small
git archive HEAD bench include tests | tar -x -C "$W/src"
(cd "$W/src" && git apply --include='bench/lab/pc_stamps.cu' "$OLDPWD/bench/lab/pc_stamps.patch")
nvcc -std=c++17 -O2 -arch=sm_90 -cudart shared -Xlinker -rpath='$ORIGIN' -Xlinker --allow-shlib-undefined \
  -Iinclude -Itests/c -Itests/cuda -Ibench/lab "$W/src/bench/lab/pc_stamps.cu" -Lbuild-prebuilt/new2 -lmas \
  -lm -lpthread -o build-prebuilt/new2/pc_stamps
cp lib/cuda/hard_small.cuh "$W/gv/base/cuda/" && cp lib/cuda/hard_small.cuh "$W/gv/role/cuda/"
patch -s "$W/gv/role/cuda/hard_small.cuh" <bench/lab/small_role_barrier.patch
gcc -std=c11 -O2 -Iinclude -c lib/common/status.c -o "$W/status.o"
for v in base role; do # as bench/small_variants.sh builds a variant
  nvcc -std=c++17 -O2 -lineinfo -arch=sm_90 -I"$W/gv/$v" -Iinclude -Ilib -Itests/c -Itests/cuda \
    tests/cuda/bench_small_phases.cu "$W/status.o" -o "build-prebuilt/small/bsp_$v"
done
rm -rf "$W"
du -sh build-prebuilt
