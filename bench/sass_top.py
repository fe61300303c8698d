"""Top instructions by warp-stall samples in an ncu SourceCounters CSV
(`ncu --page source --print-source sass --csv`), with their execution counts,
then the executed instructions summed by opcode (where the issue slots go).
    python3 bench/sass_top.py FILE.csv [N]"""
import csv
import sys


def main():
    rows = list(csv.reader(open(sys.argv[1])))
    n_top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    hi = next(i for i, r in enumerate(rows) if "Source" in r and "Address" in r)
    head, data = rows[hi], rows[hi + 1:]
    src = head.index("Source")
    smp = head.index("Warp Stall Sampling (All Samples)")
    exe = head.index("Instructions Executed")

    def num(x):
        try:
            return float(x.replace(",", ""))
        except ValueError:
            return 0.0
    total = sum(num(r[smp]) for r in data if len(r) > smp) or 1.0
    print(f"{len(data)} instructions, {total:.0f} samples")
    ranked = sorted(range(len(data)), key=lambda i: -num(data[i][smp]))[:n_top]
    for i in sorted(ranked):
        r = data[i]
        print(f"{i:6d} {num(r[smp]) / total * 100:5.1f}% exec {num(r[exe]):>10.0f}  {r[src][:80]}")
    ops = {}
    for r in data:
        if len(r) <= max(src, exe):
            continue
        words = r[src].split()
        if not words:
            continue
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        ops[op.split(".")[0]] = ops.get(op.split(".")[0], 0.0) + num(r[exe])
    whole = sum(ops.values()) or 1.0
    print(f"executed warp instructions by opcode ({whole:.0f} in all):")
    for op, n in sorted(ops.items(), key=lambda kv: -kv[1])[:24]:
        print(f"  {op:10s} {n:14.0f} {n / whole * 100:5.1f}%")


if __name__ == "__main__":
    main()
