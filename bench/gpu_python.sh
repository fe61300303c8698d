#!/usr/bin/env bash
# The Python package on a GPU machine: build and install it (no PyPI there:
# --no-build-isolation with the machine's scikit-build-core), run the GPU
# Python tests, then `python -m libmas bench --device cuda --calls`.
#   bench/gpu_python.sh [pytest files...]   (default: every tests/python/test_*.py)
# Logs go to $OUT (if set) or build-gpu/logs.
set -u -o pipefail
cd "$(dirname "$0")/.."
LOGS=${OUT:-build-gpu/logs}
mkdir -p "$LOGS"
R=$PWD
fail=0
echo "=== pip install (CUDA build) ==="
CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=90" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
  python3 -m pip install --no-build-isolation --no-deps -q . >"$LOGS/pip.log" 2>&1 \
  || { tail -30 "$LOGS/pip.log"; exit 1; }
files=()
for f in "$@"; do case "$f" in /*) files+=("$f") ;; *) files+=("$R/$f") ;; esac; done
[ ${#files[@]} -gt 0 ] || files=("$R"/tests/python/test_*.py)
echo "=== pytest ${files[*]##*/} ==="
(cd /tmp && timeout 400 python3 -m pytest -q -p no:cacheprovider "${files[@]}") 2>&1 \
  | tee "$LOGS/pytest.log" | tail -25 || fail=1
if [ "${MAS_CALLS:-1}" = 1 ]; then
  echo "=== python -m libmas bench --device cuda --calls ==="
  (cd /tmp && timeout 300 python3 -m libmas bench --device cuda --calls) 2>&1 | tee "$LOGS/calls.log" | tail -45 || fail=1
fi
exit $fail
