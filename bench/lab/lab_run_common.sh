# Sourced by the device-call scripts of bench/lab (*_run.sh) that run sides prebuilt here
# by bench/lab/prebuilt_ab.sh: moves into build-prebuilt/ (or $PREBUILT, a copy of one kept
# for a second A/B in the same session), puts the CUDA tools on the path,
# starts the clock (t0) and the two logs every such call writes, $L (tests.log: steps and
# their times) and $A (ab.log: the timed rounds), each headed by the GPU and its clock.
# Then: ab_rounds N SIDE... runs N rounds of `SIDE/loop 40` for each side into $A.
set -u
cd "$(dirname "${BASH_SOURCE[1]}")/../../${PREBUILT:-build-prebuilt}" || exit 1
export PATH="$PATH:/usr/local/cuda/bin" LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
t0=$SECONDS L=$OUT/tests.log A=$OUT/ab.log
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$L" >"$A"

ab_rounds() {
  local n=$1 k v
  shift
  for k in $(seq "$n"); do for v in "$@"; do
    echo "=== $v, round $k" >>"$A"; timeout 60 "./$v/loop" 40 >>"$A" 2>&1
  done; done
}
