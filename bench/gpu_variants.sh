#!/usr/bin/env bash
# Variants of one build timed side by side on the GPU machine: for a lab
# patch that picks its variant at run time from an environment variable
# (bench/lab/coef_select.patch: MAS_LAB_COEF), one build of libmas and the
# module (no test programs: their nvcc is minutes, and a session's device
# time is 30), then bench/fused_ab.py under each value, alternating, ROUNDS
# times (default 2). Why: two builds of an A/B are ~160 s of a call; and in
# session 21 a script that compiled the test programs before timing the
# second variant ran out of device time with one variant timed.
# Device: run(command="VAR=MAS_LAB_COEF VALUES='none sel w16 sel16' bash bench/gpu_variants.sh")
# Env: VAR, VALUES (space-separated; "none" leaves VAR unset), SHAPES and N
# as bench/fused_ab.py, ROUNDS; TESTS="test_fused_cuda ..." compiles and runs
# those CUDA test programs with --small under each value after the timings;
# SANITIZE=1 then runs each under compute-sanitizer memcheck and racecheck
# with the last value (the variant a lab would land).
# Output: $OUT/variants.log (or build-variants/variants.log).
set -u -o pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
R=$PWD
B=/tmp/variants_build
LOG=${OUT:-build-variants}/variants.log
mkdir -p "$(dirname "$LOG")"
: "${VAR:?VAR: the environment variable that picks the variant}"
: "${VALUES:?VALUES: its values, space-separated}"
t0=$SECONDS
. bench/gpu_build.sh
gpu_build . "$B" "$(nproc)" "$B.log" _C _torch | tee "$LOG" || exit 1
echo "build: $((SECONDS - t0)) s" | tee -a "$LOG"
run_as() { # value, command...: the command with VAR set to the value ("none": unset)
  local v=$1; shift
  if [ "$v" = none ]; then env -u "$VAR" "$@"; else env "$VAR=$v" "$@"; fi
}
for k in $(seq "${ROUNDS:-2}"); do
  for v in $VALUES; do
    echo "=== $VAR=$v, round $k" >>"$LOG"
    (cd /tmp && run_as "$v" env PYTHONPATH="$B/pkg" timeout 120 python3 "$R/bench/fused_ab.py") 2>&1 |
      grep -v "Warn\|_warn" >>"$LOG"
  done
done
for t in ${TESTS:-}; do
  nvcc -std=c++17 -O2 -arch=sm_"${MAS_CUDA_ARCH:-90}" -Iinclude -Ilib -Itests/c "tests/cuda/$t.cu" \
    "$B/libmas.a" -lm -lpthread -o "$B/$t" >"$B/nvcc_$t.log" 2>&1 || { tail -5 "$B/nvcc_$t.log" >>"$LOG"; continue; }
  for v in $VALUES; do
    echo "=== $t --small, $VAR=$v: $(run_as "$v" timeout 120 "$B/$t" --small 2>&1 | tail -1)" >>"$LOG"
  done
done
last=${VALUES##* }
for t in ${TESTS:-}; do
  [ "${SANITIZE:-0}" = 1 ] && [ -x "$B/$t" ] || continue
  for tool in memcheck racecheck; do
    echo "=== $tool $t 7 --small, $VAR=$last: $(run_as "$last" timeout 300 compute-sanitizer \
      --tool $tool --print-limit 20 "$B/$t" 7 --small 2>&1 | grep -E "SUMMARY|checks" | tr '\n' ' ')" >>"$LOG"
  done
done
echo "done: $((SECONDS - t0)) s" >>"$LOG"
