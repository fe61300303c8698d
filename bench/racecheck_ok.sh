# racecheck_ok LOG: whether a compute-sanitizer racecheck log that reported
# hazards (exit 9) is still a pass. The soft sweeps' warps hand values over
# through tagged entries and a progress count (lib/cuda/dp_link.cuh), which
# racecheck reports (it does not model that hand-over): pass when every access
# it names is there and the tests passed. Prints the count and any access
# elsewhere. Sourced by bench/gpu_soft.sh and bench/gpu_one_call.sh.
racecheck_ok() {
  local named other
  named=$(grep -cE "access at" "$1")
  other=$(grep -E "access at" "$1" | grep -vc "dp_link.cuh")
  echo "racecheck: $named accesses named, $other outside the tagged hand-over (dp_link.cuh)"
  grep -E "access at" "$1" | grep -v "dp_link.cuh" | sort | uniq -c | head -10
  [ "$other" -eq 0 ] && grep -q " 0 failed" "$1"
}
