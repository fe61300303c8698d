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
