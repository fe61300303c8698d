#!/usr/bin/env bash
# Lab (session 32): bench/lab/lds128_lab.cu under ncu, a line a pattern: its shared
# wavefronts a 16-byte load (l1tex wavefronts / shared load instructions).
# Here:   nvcc -std=c++17 -O3 -arch=sm_90 -Itests/cuda bench/lab/lds128_lab.cu -o LAB
# Device: bash bench/lab/lds128_ncu.sh LAB   (~5 s)
set -u
BIN=${1:?usage: lds128_ncu.sh LDS128_LAB_BINARY}
export PATH="$PATH:/usr/local/cuda/bin"
M=l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,sm__sass_inst_executed_op_shared_ld.sum
P=$(mktemp) # the patterns in launch order, as the program prints them
trap 'rm -f "$P"' EXIT
"$BIN" >"$P" || exit 1
ncu --csv --metrics "$M" "$BIN" 2>/dev/null | python3 -c '
import sys
sys.path.insert(0, sys.argv[2])
from ncu_launches import launches, number
print("| pattern | lanes read vectors | wavefronts a load |")
print("|---|---|---|")
lines = open(sys.argv[1]).read().splitlines()
for line, m in zip(lines, launches(sys.stdin).values()):
    name, vecs = line.split(": ", 1)[1].rsplit(":", 1)
    w = number(m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"])
    n = number(m["sm__sass_inst_executed_op_shared_ld.sum"])
    print(f"| {name} | {vecs.strip()} | {w / n:.2f} |")
' "$P" "$(dirname "$0")"
