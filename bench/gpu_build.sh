# Sourced by bench/gpu_one_call.sh, bench/gpu_ab.sh and bench/gpu_variants.sh:
# the one CUDA build of libmas and the Python module they share.
#
# gpu_build SRC DIR JOBS LOG [TARGET...]: configures SRC into DIR (Release,
# -DSKBUILD=ON, CUDA for ${MAS_CUDA_ARCH:-90}), builds TARGETs (all when
# none) with JOBS jobs, logging to LOG, then makes DIR/pkg an importable
# package (SRC's python/libmas with the built _C and, when built, the _torch
# glue). On a failure prints LOG's last 30 lines and returns 1.
gpu_build() {
  local src=$1 dir=$2 jobs=$3 log=$4
  shift 4
  local targets=()
  [ $# -gt 0 ] && targets=(--target "$@")
  cmake -S "$src" -B "$dir" -DSKBUILD=ON -DMAS_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="${MAS_CUDA_ARCH:-90}" -DPython_EXECUTABLE="$(command -v python3)" \
    >"$log" 2>&1 && cmake --build "$dir" -j"$jobs" ${targets[@]+"${targets[@]}"} >>"$log" 2>&1 ||
    { tail -30 "$log"; return 1; }
  rm -rf "$dir/pkg" && mkdir -p "$dir/pkg" && cp -r "$src/python/libmas" "$dir/pkg/" &&
    cp "$dir"/_C*.so "$dir/pkg/libmas/" && { cp "$dir"/_torch*.so "$dir/pkg/libmas/" 2>/dev/null || true; }
}
