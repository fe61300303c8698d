#!/usr/bin/env bash
# The fused Glow-TTS alignment on a GPU machine (issue 11): install the
# package (CUDA build), run the fused Python tests on CUDA tensors (the CUDA
# entry points are still the exact fallback gaussian_loglik + align /
# forward_sum), the example at a training shape on CUDA, then
# `python -m libmas bench --fused --device cuda` (fused vs unfused rows,
# time and peak memory; the B=8 T=4096 S=32768 row needs ~9 GB).
#   bench/gpu_fused.sh
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
echo "=== pytest test_fused.py test_glow_tts_example.py ==="
(cd /tmp && timeout 400 python3 -m pytest -q -p no:cacheprovider "$R/tests/python/test_fused.py" \
  "$R/tests/python/test_glow_tts_example.py") 2>&1 | tee "$LOGS/pytest-fused.log" | tail -15 || fail=1
echo "=== examples/glow_tts_step.py --device cuda (B=32 T=512 S=2048) ==="
(cd /tmp && timeout 300 python3 "$R/examples/glow_tts_step.py" --device cuda --batch 32 \
  --tokens 512 --frames 2048 --repeat 10) 2>&1 | tee "$LOGS/example-fused.log" | tail -8 || fail=1
echo "=== python -m libmas bench --fused --device cuda ==="
(cd /tmp && timeout 400 python3 -m libmas bench --fused --device cuda) 2>&1 \
  | tee "$LOGS/bench-fused.log" | tail -15 || fail=1
exit $fail
