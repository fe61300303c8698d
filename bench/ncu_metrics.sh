# Sourced by the bench/profile_*.sh scripts: the ncu metrics of the warp
# stall reasons, per issued instruction, comma-separated (append the
# script's own metrics after a comma), and the sed that shortens their
# names in ncu's output.
S=smsp__average_warps_issue_stalled
STALL_METRICS=""
for r in barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait not_selected \
         selected dispatch_stall lg_throttle no_instruction branch_resolving membar drain sleeping; do
  STALL_METRICS="$STALL_METRICS${STALL_METRICS:+,}${S}_${r}_per_issue_active.ratio"
done
SHORT_STALLS=(-e "s/${S}_//" -e 's/_per_issue_active.ratio//')

# ncu_python_kernel KERNEL PKG SCRIPT CSV METRICS: two ncu passes over the
# third launch of the kernel matching KERNEL in `python3 SCRIPT` (run from
# /tmp with PYTHONPATH=PKG): METRICS (the stall metrics first), printed with
# short names, then the per-instruction samples to CSV and its top ${TOP:-30}
# lines by bench/sass_top.py.
ncu_python_kernel() {
  local kernel=$1 pkg=$2 script=$3 csv=$4 metrics=$5 top_py
  top_py="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/sass_top.py"
  (cd /tmp && PYTHONPATH="$pkg" ncu --kernel-name "regex:$kernel" --launch-skip 2 --launch-count 1 \
    --metrics "$metrics" python3 "$script" 2>&1) | grep -E "$kernel|smsp__|sm__|gpu__|l1tex__" \
    | sed "${SHORT_STALLS[@]}"
  (cd /tmp && PYTHONPATH="$pkg" ncu --kernel-name "regex:$kernel" --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
    python3 "$script" >"$csv" 2>&1)
  python3 "$top_py" "$csv" "${TOP:-30}"
}
