#!/usr/bin/env python3
"""Summarise an Nsight Compute per-instruction table (ncu -i REPORT --page
source --csv --print-source sass): instructions executed, warp-stall samples
by reason, and the instructions with the most samples.

    python3 bench/ncu_summary.py TABLE.csv [TOP]
"""
import csv
import sys


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    rows = list(csv.reader(open(path)))
    # row 0 names the kernel, row 1 holds the column names
    head, data = rows[1], rows[2:]
    col_samples = head.index("Warp Stall Sampling (All Samples)")
    col_exec = head.index("Instructions Executed")
    reasons = [i for i, h in enumerate(head) if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(int(r[col_samples] or 0) for r in data)
    executed = sum(int(r[col_exec] or 0) for r in data)
    print(f"{rows[0][1] if len(rows[0]) > 1 else path}")
    print(f"warp instructions executed {executed}, stall samples {total}")
    by_reason = sorted(((sum(int(r[i] or 0) for r in data), head[i][6:]) for i in reasons), reverse=True)
    print("samples by reason: " + ", ".join(f"{name} {100 * n / max(total, 1):.0f}%" for n, name in by_reason[:6]))
    for r in sorted(data, key=lambda r: -int(r[col_samples] or 0))[:top]:
        n = int(r[col_samples] or 0)
        why = sorted(((int(r[i] or 0), head[i][6:]) for i in reasons), reverse=True)[:2]
        print(f"  {100 * n / max(total, 1):5.1f}%  x{int(r[col_exec] or 0):<9} {r[1].strip()[:60]:60} "
              + " ".join(f"{name}:{k}" for k, name in why if k))


if __name__ == "__main__":
    main()
