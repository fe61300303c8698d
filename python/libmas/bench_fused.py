"""``python -m libmas bench --fused``: the fused Glow-TTS alignment
(``align_gaussian``: likelihood inside hard MAS) against the unfused path
(``gaussian_loglik`` then ``align``) on the same inputs, time and peak extra
memory, D = 80, float32; both must give the same indices and score bits.

CPU: one thread unless --threads; memory is the peak of NumPy allocations
during the call (tracemalloc: the [B,T,S] matrix, the workspaces; a
workspace up to 1 MB is kept between calls and not counted again); then,
with PyTorch installed, ``forward_sum_gaussian`` forward and backward
against ``forward_sum(gaussian_loglik(...))`` with autograd. CUDA:
wall time a call in a loop, the kernels' time from torch.profiler and the
peak of PyTorch's allocator, full lengths, next to the unfused path and to
Glow-TTS's PyTorch logp + align, and ``align_gaussian(precision="tf32")``
(its time, its bits against the unfused path in TF32, the frames it
aligns differently from the default); then ``forward_sum_gaussian`` forward and
backward against ``forward_sum(gaussian_loglik(...))`` with autograd (time,
its largest kernels, peak memory, log_z bits).
"""

import statistics
import sys
import time
import tracemalloc

import numpy as np

from . import _C, fused, hard, likelihood, soft

CPU_SHAPES = ((8, 100, 400), (8, 256, 1024), (32, 150, 800), (4, 512, 2048))
CUDA_SHAPES = ((32, 150, 800), (32, 512, 2048), (16, 1024, 4096), (8, 4096, 32768))
D = 80


def _inputs(rng, b, t, s):
    z = rng.standard_normal((b, D, s)).astype(np.float32)
    m = rng.standard_normal((b, D, t)).astype(np.float32)
    ls = (0.3 * rng.standard_normal((b, D, t))).astype(np.float32)
    # uneven lengths as in a training batch: 60-100% of the axes, ~4 frames a token
    x = rng.integers(max(1, int(0.6 * t)), t + 1, size=b)
    y = np.minimum(s, np.maximum(x, (x * s // t * rng.uniform(0.8, 1.0, size=b)).astype(int)))
    y[0], x[0] = s, t
    return z, m, ls, x.astype(np.int64), y.astype(np.int64)


def _median_ms(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _peak_mb(fn):
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def bench_cpu(args):
    threads = args.threads or 1
    repeat = args.repeat or 5
    rng = np.random.default_rng(args.seed)
    rows = []
    for b, t, s in CPU_SHAPES:
        z, m, ls, x, y = _inputs(rng, b, t, s)

        def fused_call():
            return fused.align_gaussian(z, m, ls, x, y, threads=threads)

        def unfused_call():
            v = likelihood.gaussian_loglik(z, m, ls, x, y, threads=threads)
            return hard.align(v, x, y, threads=threads)

        r1, r2 = fused_call(), unfused_call()
        same = bool((r1.indices == r2.indices).all() and r1.score.tobytes() == r2.score.tobytes())
        row = {"shape": f"B={b} T={t} S={s}", "fused_ms": _median_ms(fused_call, repeat),
               "unfused_ms": _median_ms(unfused_call, repeat), "fused_mb": _peak_mb(fused_call),
               "unfused_mb": _peak_mb(unfused_call), "same": same}
        rows.append(row)
        print(f"{row['shape']}: fused {row['fused_ms']:.2f} ms, unfused "
              f"{row['unfused_ms']:.2f} ms", file=sys.stderr, flush=True)
    lines = [f"CPU, {threads} thread(s), D={D}, float32, uneven lengths; median of {repeat}",
             "",
             "| shape | fused (ms) | logp + align (ms) | speed-up | fused peak MB "
             "| unfused peak MB | same indices and score bits |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['fused_ms']:.2f} | {r['unfused_ms']:.2f} | "
                     f"{r['unfused_ms'] / r['fused_ms']:.2f}x | {r['fused_mb']:.1f} | "
                     f"{r['unfused_mb']:.1f} | {'yes' if r['same'] else 'NO'} |")
    lines += ["", _soft_table_cpu(rng, threads, repeat)]
    return rows, "\n".join(lines)


def _soft_table_cpu(rng, threads, repeat):
    """forward_sum_gaussian, forward and backward, against
    forward_sum(gaussian_loglik(...)) with autograd, on CPU tensors; PyTorch
    runs the same number of threads as libmas."""
    try:
        import torch
    except ImportError:
        return "forward_sum_gaussian: skipped (its backward needs PyTorch, not installed)"
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    lines = [f"forward_sum_gaussian, forward + backward (log_z.sum().backward() to z, mean and "
             f"log_std), CPU, {threads} thread(s), uneven lengths; median of {repeat}:",
             "",
             "| shape | fused (ms) | forward_sum(gaussian_loglik) (ms) | speed-up "
             "| largest gradient difference (of the largest gradient) | log_z same bits |",
             "|---|---|---|---|---|---|"]
    try:
        for b, t, s in CPU_SHAPES:
            z, m, ls, x, y = (torch.from_numpy(a) for a in _inputs(rng, b, t, s))

            def fused_fn(zz, mm, ll):
                return fused.forward_sum_gaussian(zz, mm, ll, x, y, threads=threads)

            def unfused_fn(zz, mm, ll):
                v = likelihood.gaussian_loglik(zz, mm, ll, x, y, threads=threads)
                return soft.forward_sum(v, x, y, threads=threads)

            def grads(fn):
                args = [a.clone().requires_grad_() for a in (z, m, ls)]
                fn(*args).sum().backward()
                return [a.grad for a in args]

            diff = max(float((a - c).abs().max() / c.abs().max().clamp_min(1e-30))
                       for a, c in zip(grads(fused_fn), grads(unfused_fn)))
            with torch.no_grad():
                same = bool(torch.equal(fused_fn(z, m, ls), unfused_fn(z, m, ls)))
            t_f = _median_ms(lambda: grads(fused_fn), repeat)
            t_u = _median_ms(lambda: grads(unfused_fn), repeat)
            lines.append(f"| B={b} T={t} S={s} | {t_f:.2f} | {t_u:.2f} | {t_u / t_f:.2f}x | "
                         f"{diff:.1e} | {'yes' if same else 'NO'} |")
            print(f"B={b} T={t} S={s}: forward_sum_gaussian fused {t_f:.2f} ms, unfused "
                  f"{t_u:.2f} ms", file=sys.stderr, flush=True)
    finally:
        torch.set_num_threads(old_threads)
    return "\n".join(lines)


def _host_ms(torch, fn, n):
    """Host time a call: n calls enqueued back to back, nothing waiting on
    the GPU inside the loop (the best of 3 loops). Where it is near the wall
    time, the wall is the host's."""
    best = None
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = (time.perf_counter() - t0) / n * 1e3
        best = dt if best is None else min(best, dt)
    torch.cuda.synchronize()
    return best


def bench_cuda(args):
    """Full lengths (every item T tokens, S frames). Per call: wall time in a
    loop of back-to-back calls (the clock starts behind two queued calls),
    the kernels' own time (torch.profiler), peak extra memory of PyTorch's
    allocator; next to libmas's unfused path and to Glow-TTS's PyTorch logp
    + libmas's maximum_path-equivalent ``align``."""
    import torch

    from . import _peaks
    from .bench_likelihood import _peak_extra_mb, _torch_glow
    from .bench_topology_cuda import _kernels_ms, _loop_ms

    if not torch.cuda.is_available() or not _C.has_cuda():
        raise SystemExit("bench --fused --device cuda: needs a CUDA device and libmas built "
                         "with CUDA")
    n = args.repeat or 20
    rng = np.random.default_rng(args.seed)
    rows = []
    for b, t, s in CUDA_SHAPES:
        z, m, ls, _, _ = (torch.from_numpy(a).cuda() for a in _inputs(rng, b, t, s))
        x = torch.full((b,), t, device="cuda", dtype=torch.int64)
        y = torch.full((b,), s, device="cuda", dtype=torch.int64)

        def fused_call():
            return fused.align_gaussian(z, m, ls, x, y).indices

        def unfused_call():
            return hard.align(likelihood.gaussian_loglik(z, m, ls, x, y), x, y).indices

        def torch_call():
            return hard.align(_torch_glow(torch, z, m, ls), x, y).indices

        def tf32_call():
            return fused.align_gaussian(z, m, ls, x, y, precision="tf32").indices

        def same_as_unfused(prec):
            r1 = fused.align_gaussian(z, m, ls, x, y, precision=prec)
            r2 = hard.align(likelihood.gaussian_loglik(z, m, ls, x, y, precision=prec), x, y)
            return bool(torch.equal(r1.indices, r2.indices) and torch.equal(r1.score, r2.score))

        same, same_tf32 = same_as_unfused("float32"), same_as_unfused("tf32")
        # frames whose token moved, TF32 against the default
        moved = int((fused.align_gaussian(z, m, ls, x, y).indices != tf32_call()).sum())
        # every wall before any profiler session: after one the host is slower
        # for a while, and at T=150, where the host's ~0.06-0.15 ms a call is
        # near the kernels' time, the TF32 wall read 0.176 ms against 0.087 of
        # kernels (H200, 2026-11-29)
        row = {"shape": f"B={b} T={t} S={s}", "same": same, "same_tf32": same_tf32,
               "moved": moved, "frames": b * s,
               "fused_ms": _loop_ms(torch, fused_call, n),
               "tf32_ms": _loop_ms(torch, tf32_call, n),
               "fused_host": _host_ms(torch, fused_call, n),
               "tf32_host": _host_ms(torch, tf32_call, n)}
        others = (("unfused", unfused_call), ("torch", torch_call))
        for name, fn in others:
            try:
                row[name + "_ms"] = _loop_ms(torch, fn, max(3, n // 4))
            except torch.cuda.OutOfMemoryError:
                row[name + "_ms"] = None
            torch.cuda.empty_cache()
        row["fused_kernels"] = _kernels_ms(torch, fused_call, n)
        row["tf32_kernels"] = _kernels_ms(torch, tf32_call, n)
        row["fused_mb"] = _peak_extra_mb(torch, fused_call)
        row["tf32_kernels_ms"] = sum(row["tf32_kernels"].values())
        row["fused_kernels_ms"] = sum(row["fused_kernels"].values())
        # cells of the band: T (S - T + 1), 2 (2D + 1) flops each
        row["tflops"] = b * t * (s - t + 1) * 2 * (2 * D + 1) / row["fused_kernels_ms"] / 1e9
        for name, fn in others:
            try:
                row[name + "_mb"] = None if row[name + "_ms"] is None else \
                    _peak_extra_mb(torch, fn)
            except torch.cuda.OutOfMemoryError:
                row[name + "_mb"] = None
            torch.cuda.empty_cache()
        rows.append(row)
        del z, m, ls
        torch.cuda.empty_cache()
    peaks = _peaks.device_peaks(torch)

    def cell(v, fmt):
        return "out of memory" if v is None else fmt.format(v)

    lines = [f"CUDA, D={D}, float32, full lengths; per call over {n} back-to-back calls "
             "(median of 3 loops; every wall before the profiler runs); host a call: the "
             "same calls enqueued without waiting (where it nears the wall, the wall is the "
             "host's); "
             "kernels: torch.profiler; TFLOP/s: the band's cells, 2 (2D+1) flops each, over the "
             f"fused kernels' time, against the FP32 peak ({peaks['source']})",
             "",
             "| shape | fused wall (ms) | fused kernels (ms) | host a call (ms) | TFLOP/s "
             "| libmas logp + align (ms) | PyTorch logp + align (ms) | fused peak extra MB "
             "| unfused / PyTorch peak MB | same bits |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['shape']} | {r['fused_ms']:.3f} | {r['fused_kernels_ms']:.3f} | "
            f"{r['fused_host']:.3f} | {r['tflops']:.1f}{_peaks.percent(r['tflops'], peaks['float32'])} | "
            f"{cell(r['unfused_ms'], '{:.3f}')} | {cell(r['torch_ms'], '{:.3f}')} | "
            f"{r['fused_mb']:.1f} | {cell(r['unfused_mb'], '{:.0f}')} / "
            f"{cell(r['torch_mb'], '{:.0f}')} | {'yes' if r['same'] else 'NO'} |")
    lines += ["", "The same with precision=\"tf32\" (the cells on the tensor cores; same bits: "
              "against align(gaussian_loglik(precision=\"tf32\")); frames moved: frames whose "
              "token differs from the default precision's alignment):", "",
              "| shape | fused TF32 wall (ms) | fused TF32 kernels (ms) | host a call (ms) "
              "| same bits | frames moved |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['tf32_ms']:.3f} | {r['tf32_kernels_ms']:.3f} | "
                     f"{r['tf32_host']:.3f} | {'yes' if r['same_tf32'] else 'NO'} | {r['moved']} of {r['frames']} |")
    lines.append("")
    lines.append("The fused call's kernels (ms a call, torch.profiler), float32 / TF32:")
    for r in rows:
        for key in ("fused_kernels", "tf32_kernels"):
            parts = sorted(r[key].items(), key=lambda kv: -kv[1])
            lines.append(f"- {r['shape']}{' TF32' if key == 'tf32_kernels' else ''}: " +
                         ", ".join(f"{_short(k)} {v:.3f}" for k, v in parts))
    lines += ["", _soft_table(torch, rng, max(3, n // 4))]
    return rows, "\n".join(lines)


def _soft_table(torch, rng, n):
    """forward_sum_gaussian, forward and backward (log_z and the three
    gradients), against gaussian_loglik + forward_sum with autograd."""
    from .bench_likelihood import _peak_extra_mb as peak_mb
    from .bench_topology_cuda import _kernels_ms as kernels_ms, _loop_ms as loop_ms

    lines = ["forward_sum_gaussian, forward + backward (log_z.sum().backward() to z, mean and "
             f"log_std), per call over {n} back-to-back calls:",
             "",
             "| shape | fused wall (ms) | fused kernels (ms) | unfused wall (ms) "
             "| fused peak extra MB | unfused peak extra MB | log_z same bits |",
             "|---|---|---|---|---|---|---|"]
    parts = []
    for b, t, s in CUDA_SHAPES:
        z, m, ls = (torch.from_numpy(a).cuda().requires_grad_() for a in
                    _inputs(rng, b, t, s)[:3])
        x = torch.full((b,), t, device="cuda", dtype=torch.int64)
        y = torch.full((b,), s, device="cuda", dtype=torch.int64)

        def fused_call():
            fused.forward_sum_gaussian(z, m, ls, x, y).sum().backward()

        def unfused_call():
            soft.forward_sum(likelihood.gaussian_loglik(z, m, ls, x, y), x, y).sum().backward()

        with torch.no_grad():
            lz1 = fused.forward_sum_gaussian(z, m, ls, x, y)
            lz2 = soft.forward_sum(likelihood.gaussian_loglik(z, m, ls, x, y), x, y)
            same = bool(torch.equal(lz1, lz2))
            del lz2
        reps = n if s <= 4096 else 2
        cells = [f"{loop_ms(torch, fused_call, reps, loops=1 if s > 4096 else 3):.3f}"]
        kernels = kernels_ms(torch, fused_call, reps)
        cells.append(f"{sum(kernels.values()):.3f}")
        top = sorted(kernels.items(), key=lambda kv: -kv[1])[:6]
        parts.append(f"- B={b} T={t} S={s}: " +
                     ", ".join(f"{_short(k)} {v:.3f}" for k, v in top))
        try:
            cells.append(f"{loop_ms(torch, unfused_call, reps, loops=1 if s > 4096 else 3):.3f}")
        except torch.cuda.OutOfMemoryError:
            cells.append("out of memory")
        torch.cuda.empty_cache()
        cells.append(f"{peak_mb(torch, fused_call):.0f}")
        try:
            cells.append(f"{peak_mb(torch, unfused_call):.0f}")
        except torch.cuda.OutOfMemoryError:
            cells.append("out of memory")
        torch.cuda.empty_cache()
        lines.append(f"| B={b} T={t} S={s} | " + " | ".join(cells) +
                     f" | {'yes' if same else 'NO'} |")
        del z, m, ls
        torch.cuda.empty_cache()
    lines += ["", "Its largest kernels (ms a call, torch.profiler, forward and backward "
              "together):"] + parts
    return "\n".join(lines)


def _short(name):
    """A kernel's name without its namespace, template arguments and
    parameters: "mas_cuda::fused_forward<float, float>(...)" -> "fused_forward"."""
    name = name.replace("(anonymous namespace)::", "").split("(")[0].split("<")[0]
    return name.split("::")[-1].replace("void ", "").strip() or name


def run(args):
    from .bench import run_table

    return run_table(args, "fused Gaussian alignment", bench_cuda, bench_cpu)
