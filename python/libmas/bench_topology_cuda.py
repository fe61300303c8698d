"""``python -m libmas bench --topology --device cuda``: the topology rows of
issue 12 on the GPU, each next to its anchor in the same run:

  CTC forced alignment   B=32, S=1500, L=300, V=32, float32: libmas
      forced_align on the batch vs torchaudio.functional.forced_align per
      item (CUDA; when torchaudio loads). Target <= 0.3 ms, >= 50x.
  CTC log Z fwd + bwd    same shapes: libmas ctc_log_z + backward vs
      torch.nn.functional.ctc_loss + backward (cuDNN or native). Target
      >= 3x, log Z equal within 1e-4 relative.
  3-state HMM Viterbi    B=32, 150 phones (450 states), S=800, per-state
      float32 emissions: libmas viterbi vs libmas hard MAS (k=1) on
      [32, 150, 800]. Target <= 2x.

Times: wall per call over a loop of back-to-back calls (CUDA events around
the loop, started behind two queued calls: the steady state of a training
loop), and the kernels' own time from torch.profiler. Ceiling: the
latency floor of a frame-serial sweep, S frames x one block barrier each
(printed as ns per frame).
"""

import datetime

import numpy as np


def _loop_ms(torch, fn, n, loops=3):
    """Wall per call of n back-to-back calls, the median of `loops` loops."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(loops):
        # the clock starts behind two queued calls, as in a training loop: else
        # the first call's host time (~160 us for forced_align) is idle GPU time
        # inside the loop, 8 us a call over 20 calls
        for _ in range(2):
            fn()
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / n)
    return sorted(times)[len(times) // 2]


def _kernels_ms(torch, fn, n):
    """{kernel (or copy / memset) name: its device ms per call} over n calls
    (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    return {e.key: e.device_time_total / 1e3 / n for e in prof.key_averages()
            if e.device_time_total > 0 and e.device_type.name == "CUDA"}


def _kernel_ms(torch, fn, n):
    return sum(_kernels_ms(torch, fn, n).values())


def run(args):
    import torch

    import libmas
    from . import __version__
    from .bench_topology import _ctc_inputs

    dev = torch.device("cuda")
    rng = np.random.default_rng(args.seed)
    # the median of three loops of 50 calls: one loop of 20 read the HMM
    # row at 0.22 ms once against 0.123 ms over 100 or 400 calls (same
    # build, the kernels' 0.118 ms)
    n = 50
    rows = []
    B, S, L, V = 32, 1500, 300, 32
    lp, tg, il, tl = _ctc_inputs(rng, B, S, V, L)
    x = torch.from_numpy(lp).to(dev)
    tgt = torch.from_numpy(tg).to(dev)
    ilt, tlt = torch.from_numpy(il).to(dev), torch.from_numpy(tl).to(dev)

    def fa():
        return libmas.forced_align(x, tgt, ilt, tlt)
    wall, kern = _loop_ms(torch, fa, n), _kernel_ms(torch, fa, n)
    r = fa()
    libmas.check_errors()
    cpu = libmas.forced_align(lp, tg, il, tl)
    same = bool((r.state_ids.cpu().numpy() == cpu.state_ids).all() and
                (r.score.cpu().numpy() == cpu.score).all())
    anchor_name, anchor = "torchaudio forced_align per item (CUDA)", None
    try:
        import torchaudio.functional as taf
        t32 = tgt.int()

        def per_item():
            for b in range(B):
                taf.forced_align(x[b:b + 1], t32[b:b + 1], blank=0)
        anchor = _loop_ms(torch, per_item, 3)
    except Exception as exc:  # noqa: BLE001 - any failure to load
        anchor_name = f"torchaudio unavailable ({type(exc).__name__})"
    rows.append(("CTC forced alignment B=32 S=1500 L=300 V=32 f32", wall, kern, anchor_name,
                 anchor, S, f"target <= 0.3 ms and >= 50x; = CPU bit for bit: {same}"))

    def ours_fb():
        y = x.detach().requires_grad_(True)
        libmas.ctc_log_z(y, tgt, ilt, tlt).sum().backward()

    def torch_fb():
        y = x.detach().requires_grad_(True)
        torch.nn.functional.ctc_loss(y.transpose(0, 1), tgt, ilt, tlt,
                                     reduction="none").sum().backward()
    wall, kern = _loop_ms(torch, ours_fb, n), _kernel_ms(torch, ours_fb, n)
    anchor = _loop_ms(torch, torch_fb, n)
    a = libmas.ctc_log_z(x, tgt, ilt, tlt).double()
    b = -torch.nn.functional.ctc_loss(x.transpose(0, 1).double(), tgt, ilt, tlt,
                                      reduction="none")
    rel = float(((a - b).abs() / b.abs()).max())
    y1 = x.detach().double().requires_grad_(True)
    torch.nn.functional.ctc_loss(y1.transpose(0, 1), tgt, ilt, tlt, reduction="sum").backward()
    y2 = x.detach().requires_grad_(True)
    (-libmas.ctc_log_z(y2, tgt, ilt, tlt)).sum().backward()
    # ctc_loss's gradient is w.r.t. log-softmax inputs: exp(lp) - posterior
    ref = y1.grad - torch.exp(y1.detach())
    gerr = float((y2.grad.double() - ref).abs().max())
    rows.append(("CTC log Z fwd+bwd, same shapes", wall, kern, "torch ctc_loss fwd+bwd", anchor,
                 2 * S, f"target >= 3x; max rel. diff of log Z vs float64 ctc_loss {rel:.1e}, "
                 f"max grad diff {gerr:.1e}"))

    B, P, S, k = 32, 150, 800, 3
    em = torch.randn(B, k * P, S, device=dev)
    v1 = torch.randn(B, P, S, device=dev)
    topo = libmas.Topology(3, stay=[-0.2, -0.3, -0.2], advance=[-1.0, -1.2, -1.1])
    Ls, Ss = torch.full((B,), P, device=dev), torch.full((B,), S, device=dev)

    def hmm():
        return libmas.viterbi(em, Ls, Ss, topo)

    def k1():
        return libmas.align(v1, Ls, Ss).durations
    wall, kern = _loop_ms(torch, hmm, n), _kernel_ms(torch, hmm, n)
    w1, k1k = _loop_ms(torch, k1, n), _kernel_ms(torch, k1, n)
    rows.append(("3-state HMM Viterbi B=32 150 phones S=800", wall, kern,
                 "libmas hard MAS k=1 [32,150,800] (wall / kernels)", w1, S,
                 f"ratio {wall / w1:.2f}x wall, {kern / k1k:.2f}x kernels (target <= 2x)"))
    libmas.check_errors()

    now = datetime.datetime.now().isoformat(timespec="seconds")
    print(f"libmas {__version__} topology bench on {torch.cuda.get_device_name()}, {now}")
    print("command: python -m libmas bench --topology --device cuda")
    print(f"wall: per call over {n} back-to-back calls, median of 3 loops (clock started "
          "behind two queued calls); kernels: torch.profiler; floor: frames x one block barrier (ns per frame "
          "shown)\n")
    print("| work | libmas wall (ms) | libmas kernels (ms) | ns per frame | anchor | "
          "anchor (ms) | speed-up (wall) | note |")
    print("|---|---|---|---|---|---|---|---|")
    for name, wall, kern, aname, at, frames, note in rows:
        sp = f"{at / wall:.1f}x" if at else "-"
        ams = f"{at:.3f}" if at else "-"
        print(f"| {name} | {wall:.3f} | {kern:.3f} | {kern * 1e6 / frames:.0f} | {aname} | "
              f"{ams} | {sp} | {note} |")
