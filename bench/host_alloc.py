"""Host time of align's output allocation on CUDA (issue 9): three
torch.empty against one allocation carved by as_strided, and whole align
calls with each (the carved form patched into hard._align_core for the
run). Run on a GPU machine with the package importable:
    python3 bench/host_alloc.py
Prints microseconds per call, three repeats; nothing here is a test.
Recorded in results/calls-gpu-h100.md (2026-11-27, session 3)."""

import time

import torch

import libmas
from libmas import _arrays, hard

B, T, S = 16, 60, 300


def per_call(fn, n=3000):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main():
    dev = torch.device("cuda")
    i32, f32 = torch.int32, torch.float32
    n_t, n_s = (B * T + 63) // 64 * 64, (B * S + 63) // 64 * 64

    def three():
        return (torch.empty((B, T), dtype=i32, device=dev),
                torch.empty((B, S), dtype=i32, device=dev),
                torch.empty((B,), dtype=f32, device=dev))

    def carved():
        buf = torch.empty((n_t + n_s + 64,), dtype=i32, device=dev)
        return (buf.as_strided((B, T), (T, 1), 0), buf.as_strided((B, S), (S, 1), n_t),
                buf.view(f32).as_strided((B,), (1,), n_t + n_s))

    def core_carved(fname, frame, v, x_lengths, y_lengths, bst, threads, budget=None):
        code = _arrays.value_code(frame, v, fname)
        batch, _, _ = hard._shape_checked(v, bst, fname)
        x_len = frame.lengths(x_lengths, batch, f"{fname}: x_lengths")
        y_len = frame.lengths(y_lengths, batch, f"{fname}: y_lengths")
        d, i, s = carved()
        pending = hard._run(fname, frame, v, code, x_len, y_len, bst, (None, d, i, s), threads,
                            budget)
        return d, i, s, pending

    v = torch.randn(B, T, S, device=dev)
    xl = torch.full((B,), T, dtype=torch.int64, device=dev)
    yl = torch.full((B,), S, dtype=torch.int64, device=dev)
    rows = []
    core = hard._align_core
    for _ in range(3):
        rows.append(("3 x torch.empty (+ free)", per_call(three)))
        rows.append(("1 empty + 3 as_strided + view (+ free)", per_call(carved)))
        rows.append(("align(...).durations", per_call(lambda: libmas.align(v, xl, yl).durations)))
        hard._align_core = core_carved
        try:
            rows.append(("align(...).durations, carved outputs",
                         per_call(lambda: libmas.align(v, xl, yl).durations)))
        finally:
            hard._align_core = core
    print(f"B={B} T={T} S={S}, host time per call in us")
    for name, us in rows:
        print(f"  {name:45s} {us:7.2f}")


if __name__ == "__main__":
    main()
