#!/usr/bin/env bash
# A/B on one GPU machine: a base tree (a `git archive` tarball, carried:
# the device's copy has no .git) and this working tree, built side by side
# (two CMake builds, half the cores each), then bench/fused_ab.py on each,
# alternating, ROUNDS times (default 2). Why: across fresh machines of one
# kind the same build's time moved by more than most changes it judged
# (results/fused-gpu-h100.md, session 19).
# Here:   mkdir -p build-ab && git archive main | gzip > build-ab/base.tgz
# Device: run(command="bash bench/gpu_ab.sh build-ab/base.tgz", carry=["build-ab"])
# Env: SHAPES and N as bench/fused_ab.py; ROUNDS. Output: $OUT/ab.log (or
# build-ab/ab.log). Exit: non-zero when a build failed.
set -u -o pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
R=$PWD
TGZ=${1:?usage: bench/gpu_ab.sh BASE.tgz}
LOG=${OUT:-build-ab}/ab.log
mkdir -p "$(dirname "$LOG")" /tmp/ab_base
tar -xzf "$TGZ" -C /tmp/ab_base || exit 1
jobs=$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))
. bench/gpu_build.sh
build() { gpu_build "$1" "$2" "$jobs" "$2.log"; } # source tree, build dir: the package in $2/pkg
t0=$SECONDS
build "$R" /tmp/ab_new & p1=$!
build /tmp/ab_base /tmp/ab_old & p2=$!
wait $p1 && wait $p2 || { echo "a build failed" | tee "$LOG"; exit 1; }
echo "builds: $((SECONDS - t0)) s" | tee "$LOG"
for k in $(seq "${ROUNDS:-2}"); do
  for v in old new; do
    echo "=== $v, round $k" >>"$LOG"
    (cd /tmp && PYTHONPATH=/tmp/ab_$v/pkg timeout 300 python3 "$R/bench/fused_ab.py") 2>&1 |
      grep -v "Warn\|_warn" >>"$LOG"
  done
done
