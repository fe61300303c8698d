"""Long-form alignment on the GPU (issue 15): one 2-hour item, aligned
unbounded (when its workspace fits) and within budgets of 1 GB and the
smallest that works, each result compared with the unbounded one byte for
byte. Wall time per call from Python (torch.cuda.synchronize around one
call, after one warm-up call of the same kind), the way a user calls it.
Rows: CTC forced alignment (log-probs [1, S, V], L labels) and hard MAS on
a float16 [1, T, S] score matrix (the float32 one would be 86 GB).

    python bench/longform_gpu.py [--frames S] [--tokens T] [--skip-hard]
"""
import argparse
import re
import time

import torch

import libmas


def minimum(fn):
    try:
        fn(1)
    except ValueError as e:
        return int(re.search(r"needs on the GPU: (\d+) bytes", str(e)).group(1))
    raise AssertionError("a 1-byte budget was accepted")


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    r = fn()
    torch.cuda.synchronize()
    return r, time.perf_counter() - t0


def rows(name, call, outputs, full):
    least = minimum(lambda n: call(n))
    print(f"\n{name}\n")
    print("| workspace | bytes | s | equal to unbounded |\n|---|---|---|---|")
    call(None)  # warm-up (module load, kernel caches)
    base = None
    for label, budget in (("unbounded", None), ("1 GB budget", 1 << 30), ("smallest", least)):
        if budget is not None and budget >= full:
            continue
        r, s = timed(lambda: call(budget))
        got = [getattr(r, o).cpu() for o in outputs]
        same = "-" if base is None else (
            "yes" if all(torch.equal(a, b) for a, b in zip(got, base)) else "NO")
        base = base or got
        print(f"| {label} | {full if budget is None else budget} | {s:.3f} | {same} |")
        libmas.check_errors()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=360_000)
    ap.add_argument("--tokens", type=int, default=60_000)
    ap.add_argument("--skip-hard", action="store_true")
    a = ap.parse_args()
    S, L, V = a.frames, a.tokens, 32
    dev = torch.device("cuda")
    print(f"libmas {libmas.__version__} long-form GPU bench on {torch.cuda.get_device_name()}, "
          f"{time.strftime('%Y-%m-%dT%H:%M:%S')}; S={S} frames (2 hours at 50 frames/s "
          f"for 360000), one item")
    g = torch.Generator(device=dev).manual_seed(5)
    lp = torch.log_softmax(torch.randn(1, S, V, device=dev, generator=g) * 3, -1)
    tg = torch.randint(1, V, (1, L), device=dev, generator=g)
    il, tl = torch.tensor([S], device=dev), torch.tensor([L], device=dev)
    call = lambda n: libmas.forced_align(lp, tg, il, tl, max_workspace_bytes=n)
    full = int(re.search(r"unbounded: (\d+) bytes", _error(lambda: call(1))).group(1))
    rows(f"CTC forced alignment, L={L} labels ({2 * L + 1} states), V={V}, float32",
         call, ("frame_labels", "token_spans", "score"), full)
    del lp
    if a.skip_hard:
        return
    T = L
    v = torch.randn(1, T, S, device=dev, dtype=torch.float16, generator=g)
    x, y = torch.tensor([T], device=dev), torch.tensor([S], device=dev)
    call = lambda n: libmas.align(v, x, y, max_workspace_bytes=n)
    full = int(re.search(r"unbounded: (\d+) bytes", _error(lambda: call(1))).group(1))
    rows(f"hard MAS, T={T} tokens, float16 scores ({v.numel() * 2 / 1e9:.1f} GB)", call,
         ("durations", "indices", "score"), full)


def _error(fn):
    try:
        fn()
    except ValueError as e:
        return str(e)
    raise AssertionError("no error")


if __name__ == "__main__":
    main()
