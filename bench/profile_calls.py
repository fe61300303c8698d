"""Where the host time of a small CUDA call goes (issue 9): the cost of each
piece of the Python path measured alone in a loop, then cProfile of the
whole call. Run on a GPU machine after installing the package:
    python3 bench/profile_calls.py [--calls N] [--ctc | --hmm | --alloc]
Prints microseconds per call; nothing here is a test."""

import argparse
import cProfile
import io
import pstats
import time

import torch

import libmas
from libmas import _arrays, _C, _fast, errors


def per_call_us(fn, n):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--shape", default="16,60,300")
    ap.add_argument("--ctc", action="store_true",
                    help="forced_align at the issue-12 shape (B=32 S=1500 L=300 V=32) instead")
    ap.add_argument("--hmm", action="store_true",
                    help="viterbi of the issue-12 3-state HMM (B=32, 150 phones, S=800) instead")
    ap.add_argument("--alloc", action="store_true",
                    help="align's three output allocations against one carved by as_strided, "
                         "three repeats, instead")
    args = ap.parse_args()
    if args.alloc:
        return alloc(max(args.calls, 1000))
    if args.ctc:
        return ctc(max(args.calls // 10, 20))
    if args.hmm:
        return hmm(max(args.calls // 10, 20))
    B, T, S = (int(x) for x in args.shape.split(","))
    n = args.calls
    dev = torch.device("cuda")
    v = torch.randn(B, T, S, device=dev)
    mask = torch.ones(B, T, S, device=dev)
    xl = torch.full((B,), T, dtype=torch.int64, device=dev)
    yl = torch.full((B,), S, dtype=torch.int64, device=dev)
    logits = torch.randn(B, T, S, device=dev)
    print(f"B={B} T={T} S={S}, {n} calls per row, host time per call (enqueue only) in us")
    rows = []

    def row(name, fn):
        rows.append((name, per_call_us(fn, n)))
        print(f"  {name:55s} {rows[-1][1]:8.2f}")

    row("libmas.align(...).durations", lambda: libmas.align(v, xl, yl).durations)
    row("libmas.maximum_path(value, mask)", lambda: libmas.maximum_path(v, mask))
    row("libmas.forward_sum(value, xl, yl)", lambda: libmas.forward_sum(v, xl, yl))
    row("libmas.monotonic_attention(logits)", lambda: libmas.monotonic_attention(logits))
    glue = _fast.available()
    if glue is not None:
        _fast.ENABLED = False
        row("  the same align, general path", lambda: libmas.align(v, xl, yl).durations)
        row("  the same monotonic_attention, general path",
            lambda: libmas.monotonic_attention(logits))
        _fast.ENABLED = True
        row("  libmas._torch.align alone (no error word)",
            lambda: glue.align(v, xl, yl, False, 0, torch._C._cuda_getCurrentRawStream(0), 0))
    # pieces
    row("torch.empty((B,T), int32, cuda)", lambda: torch.empty((B, T), dtype=torch.int32, device=dev))
    row("torch.empty((n,), uint8, cuda)", lambda: torch.empty((4096,), dtype=torch.uint8, device=dev))
    row("torch.utils.dlpack.to_dlpack(v)", lambda: torch.utils.dlpack.to_dlpack(v))
    row("torch._C._to_dlpack(v)", lambda: torch._C._to_dlpack(v))
    row("mask sums (lengths_from_mask)", lambda: (mask[:, :, 0].sum(1, dtype=torch.int64),
                                                  mask[:, 0, :].sum(1, dtype=torch.int64)))
    row("torch._C._cuda_getDevice()", lambda: torch._C._cuda_getDevice())
    row("torch._C._cuda_getCurrentRawStream(0)", lambda: torch._C._cuda_getCurrentRawStream(0))
    row("torch._C._cuda_isCurrentStreamCapturing()",
        lambda: torch._C._cuda_isCurrentStreamCapturing())
    row("torch.compiler.is_compiling()", lambda: torch.compiler.is_compiling())
    row("_arrays.frame_for(v)", lambda: _arrays.frame_for(v, "f"))
    frame, _ = _arrays.frame_for(v, "f")
    row("frame.current_stream()", lambda: frame.current_stream())
    row("frame.lengths(xl)", lambda: frame.lengths(xl, B, "x"))
    row("errors.poll()", errors.poll)
    stream, raw = frame.current_stream()

    def word_cycle():
        w, ticket = errors.begin(torch, dev, stream, poll=False)
        errors.give_back(ticket)
    row("errors.begin (no poll) + give_back", word_cycle)
    # the C call alone, handles made once
    h = torch.utils.dlpack.to_dlpack
    dur = torch.empty((B, T), dtype=torch.int32, device=dev)
    idx = torch.empty((B, S), dtype=torch.int32, device=dev)
    sc = torch.empty((B,), dtype=torch.float32, device=dev)
    nbytes = _C.hard_cuda_workspace_size(B, T, S, _C.FLOAT32)
    work = torch.empty((nbytes,), dtype=torch.uint8, device=dev)
    word = torch.full((1,), -1, dtype=torch.int64, device=dev)
    hv, hx, hy, hd, hi, hs, hw, hword = (h(a) for a in (v, xl, yl, dur, idx, sc, work, word))
    row("_C.hard_cuda (handles made once: C checks + launches)",
        lambda: _C.hard_cuda(hv, False, hx, hy, None, hd, hi, hs, hw, raw, hword))
    row("_C.hard_cuda_workspace_size", lambda: _C.hard_cuda_workspace_size(B, T, S, _C.FLOAT32))

    for name, fn in (("align", lambda: libmas.align(v, xl, yl).durations),
                     ("maximum_path", lambda: libmas.maximum_path(v, mask))):
        print_profile(name, fn, n, 22)


def print_profile(name, fn, n, top):
    """cProfile of n calls of fn, the top functions by own time."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    print(f"\n--- cProfile {name}, {n} calls (tottime) ---")
    print("\n".join(out.getvalue().splitlines()[6:top + 12]))


def alloc(n):
    """Host time of align's outputs at B=16 T=60 S=300: three torch.empty
    against one allocation carved by as_strided, next to a whole align call;
    three repeats, as the host's noise is larger than the difference."""
    dev = torch.device("cuda")
    B, T, S = 16, 60, 300
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

    v = torch.randn(B, T, S, device=dev)
    xl = torch.full((B,), T, dtype=torch.int64, device=dev)
    yl = torch.full((B,), S, dtype=torch.int64, device=dev)
    print(f"B={B} T={T} S={S}, {n} calls per row, host time per call in us")
    for _ in range(3):
        print(f"  {'3 x torch.empty (+ free)':45s} {per_call_us(three, n):8.2f}")
        print(f"  {'1 empty + 3 as_strided + view (+ free)':45s} {per_call_us(carved, n):8.2f}")
        us = per_call_us(lambda: libmas.align(v, xl, yl).durations, n)
        print(f"  {'align(...).durations':45s} {us:8.2f}")


def ctc(n):
    """forced_align at B=32 S=1500 L=300 V=32: host time per call against
    the wall of back-to-back calls, then cProfile of the call."""
    dev = torch.device("cuda")
    B, S, L, V = 32, 1500, 300, 32
    g = torch.Generator().manual_seed(0)
    lp = torch.log_softmax(torch.randn(B, S, V, generator=g), -1).to(dev)
    tgt = torch.randint(1, V, (B, L), generator=g).to(dev)
    il = torch.full((B,), S, dtype=torch.int64, device=dev)
    tl = torch.full((B,), L, dtype=torch.int64, device=dev)

    def fa():
        return libmas.forced_align(lp, tgt, il, tl)
    print(f"forced_align B={B} S={S} L={L} V={V}: host time per call (enqueue only) "
          f"{per_call_us(fa, n):.1f} us")
    fa()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fa()
    torch.cuda.synchronize()
    print(f"  wall per call (back-to-back, synchronised at the end) "
          f"{(time.perf_counter() - t0) / n * 1e6:.1f} us")
    print_profile("forced_align", fa, n, 25)


def hmm(n):
    """viterbi of a 3-state HMM at B=32, 150 phones, S=800 (the topology
    bench's row): host time per call against the wall, then cProfile."""
    dev = torch.device("cuda")
    B, P, S, k = 32, 150, 800, 3
    em = torch.randn(B, k * P, S, device=dev)
    topo = libmas.Topology(3, stay=[-0.2, -0.3, -0.2], advance=[-1.0, -1.2, -1.1])
    Ls = torch.full((B,), P, device=dev)
    Ss = torch.full((B,), S, device=dev)

    def vit():
        return libmas.viterbi(em, Ls, Ss, topo)
    print(f"viterbi 3-state HMM B={B} P={P} S={S}: host time per call (enqueue only) "
          f"{per_call_us(vit, n):.1f} us")
    vit()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        vit()
    torch.cuda.synchronize()
    print(f"  wall per call (back-to-back, synchronised at the end) "
          f"{(time.perf_counter() - t0) / n * 1e6:.1f} us")
    print_profile("viterbi", vit, n, 30)


if __name__ == "__main__":
    main()
