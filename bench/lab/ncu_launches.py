#!/usr/bin/env python3
"""ncu --csv (one row a metric and launch) read back as launches: for the
lab scripts that run a program's numbered variants under ncu
(bench/lab/products_ncu.sh, bench/lab/lds128_ncu.sh).

    ncu --csv --metrics M PROGRAM | python3 ncu_launches.py [--every N]

prints, for every N-th launch (default 1), "launch ID KERNEL" and its
metrics a line. launches(stream) gives them to other scripts: an ordered
dict of launch ID -> {metric: value string, "kernel": name}."""
import collections
import csv
import sys


def launches(stream):
    rows = [r for r in csv.reader(stream) if len(r) > 10]  # ncu's own lines are shorter
    if not rows:
        return collections.OrderedDict()
    head, rows = rows[0], rows[1:]
    ki, mi, vi, ii = (head.index(h) for h in ("Kernel Name", "Metric Name", "Metric Value", "ID"))
    by = collections.OrderedDict()
    for r in rows:
        by.setdefault(r[ii], {"kernel": r[ki]})[r[mi]] = r[vi]
    return by


def number(value):
    """a metric's value as ncu prints it (thousands separated by commas)"""
    return float(value.replace(",", ""))


def main():
    every = int(sys.argv[sys.argv.index("--every") + 1]) if "--every" in sys.argv else 1
    for i, (k, m) in enumerate(launches(sys.stdin).items()):
        if i % every:
            continue
        print("launch", k, m.pop("kernel")[:60])
        for n, v in m.items():
            print("   ", n, v)


if __name__ == "__main__":
    main()
