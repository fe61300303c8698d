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
import csv, sys, collections
rows = [r for r in csv.reader(sys.stdin) if len(r) > 10]
head, rows = rows[0], rows[1:]
mi, vi, ii = (head.index(h) for h in ("Metric Name", "Metric Value", "ID"))
by = collections.OrderedDict()
for r in rows:
    by.setdefault(r[ii], {})[r[mi]] = float(r[vi].replace(",", ""))
print("| pattern | lanes read vectors | wavefronts a load |")
print("|---|---|---|")
lines = open(sys.argv[1]).read().splitlines()
for line, m in zip(lines, by.values()):
    name, vecs = line.split(": ", 1)[1].rsplit(":", 1)
    w = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
    n = m["sm__sass_inst_executed_op_shared_ld.sum"]
    print(f"| {name} | {vecs.strip()} | {w / n:.2f} |")
' "$P"
