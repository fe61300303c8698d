"""Distance from each shared-memory load to the first use of what it loaded,
in the SASS of one kernel: how far ahead ptxas scheduled the loads.

hard_small's fast body loads the tile cells of step j+2 at step j; when
ptxas keeps that, the median distance over the kernel is ~43 instructions,
when it sinks the loads next to their use it falls to ~11-16 and the sweep
runs ~1.7x slower (bench/results/calls-gpu-h100.md, 2026-11-27). A change
anywhere in the kernel can flip it, so check a build before timing it:

  nvcc -std=c++17 -O2 -arch=sm_90 -cubin -Iinclude -Ilib -Itests/c \
    tests/cuda/bench_small_phases.cu -o k.cubin
  cuobjdump -sass -fun '_ZN8mas_cuda10hard_smallIfLb0ELb0ELb0EEEvNS_9SmallArgsE' k.cubin > k.sass
  python3 bench/sass_load_use.py k.sass

(cuobjdump: pip download nvidia-cuda-cuobjdump where the toolkit lacks it.)
"""
import re
import statistics
import sys


def instructions(path):
    out = []
    for line in open(path):
        m = re.search(r"/\*[0-9a-f]{4,5}\*/\s*(.*?)\s*;", line)
        if m:
            out.append(m.group(1))
    return out


def distances(ins):
    d = []
    for i, s in enumerate(ins):
        m = re.match(r"(@!?P\d )?LDS(\.\w+)? (R\d+),", s)
        if not m:
            continue
        reg = m.group(3)
        for j in range(i + 1, min(i + 200, len(ins))):
            t = ins[j]
            body = t.split(" ", 1)[1] if t.startswith("@") else t
            parts = body.split(" ", 1)
            regs = re.findall(r"R\d+", parts[1]) if len(parts) > 1 else []
            if reg in regs[1:] or (parts[0].startswith("ST") and reg in regs):
                d.append(j - i)
                break
            if regs and regs[0] == reg:  # overwritten before any use
                break
    return d


def main():
    ins = instructions(sys.argv[1])
    d = distances(ins)
    if not d:
        print(f"{len(ins)} instructions, no shared loads with a use")
        return
    close = sum(x <= 4 for x in d) / len(d)
    print(f"{len(ins)} instructions; {len(d)} shared loads; median load-to-use distance "
          f"{statistics.median(d)}; used within 4 instructions: {100 * close:.0f}%")


if __name__ == "__main__":
    main()
