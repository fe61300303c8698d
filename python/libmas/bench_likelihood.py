"""``python -m libmas bench --likelihood [--device cpu|cuda]``: the issue's
likelihood rows, libmas side by side with the PyTorch (and, on the CPU,
NumPy) way in the same run.

CPU: GMM 500 states x 16 Gaussians, J=36, N=1000 frames, float32, on one core
(libmas threads=1, NumPy's BLAS and PyTorch limited to one thread) and libmas
on every core; a Glow-TTS row (B=8, T=128, S=512, D=80) against its four-term
PyTorch logp. The ceiling printed is a one-thread float32 GEMM (NumPy BLAS,
1024^3), the practical single-core FMA peak.

CUDA: GMM 5000 x 256 (float32 and TF32), GMM 5000 x 16, J=36, N=256, and
Glow-TTS B=32 T=512 S=2048 D=80 (float32 and TF32); GPU time between CUDA events (median), the
peak memory allocated beyond the inputs, TFLOP/s against the device's dense
peaks (libmas._peaks: an H100 SXM's are 67 FP32, 495 TF32, 990 BF16), the
largest error against float64 of libmas and of PyTorch (same precision), and
the real-time factor at 100 frames per second for the first row. Under the
table, the Glow-TTS rows' floor (writing the output at the copy bandwidth
measured in the same run) and the float32 row's ceiling (cuBLAS's FP32 GEMM
of the same product).

Work counted: 2 * N * M * (2J+1) flops per GMM call (the expansion GEMM),
2 * B * T * S * (2D+1) for Glow-TTS.
"""

import ctypes
import math
import os
import statistics
import sys
import time

import numpy as np

from . import _C, _peaks, likelihood


def _progress(text):
    print(text, file=sys.stderr, flush=True)


def _blas_one_thread():
    """Limits the BLAS NumPy loaded to one thread (threadpoolctl when
    installed, else the OpenBLAS entry point found in the process). Returns
    a description of what was done."""
    try:
        import threadpoolctl

        threadpoolctl.threadpool_limits(1)
        return "threadpoolctl"
    except ImportError:
        pass
    done = []
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        libs = set()
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                     "openblas_set_num_threads64_", "openblas_set_num_threads"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(1)
                done.append(name)
                break
    if done:
        return "OpenBLAS " + done[0]
    return f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}"


def _median(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _gmm_model(rng, states, mix, dim, dtype=np.float32):
    m = states * mix
    mu = (rng.standard_normal((m, dim)) * 0.5).astype(dtype)
    var = rng.uniform(0.5, 1.5, (m, dim)).astype(dtype)
    lw = np.full(m, -math.log(mix), dtype)
    return mu, var, lw, [mix] * states


def _numpy_gmm(x, coef, states, mix):
    """The obvious way: one GEMM over the expansion, then a logsumexp."""
    e = np.concatenate([np.ones((x.shape[0], 1), x.dtype), x, x * x], axis=1)
    sc = (e @ coef).reshape(x.shape[0], states, mix)
    hi = sc.max(-1, keepdims=True)
    return hi[..., 0] + np.log(np.exp(sc - hi).sum(-1))


def _torch_gmm(torch, x, coef, states, mix):
    e = torch.cat([torch.ones_like(x[:, :1]), x, x * x], dim=1)
    return torch.logsumexp((e @ coef).view(x.shape[0], states, mix), dim=-1)


def _torch_glow(torch, z, m, logs):
    """Glow-TTS models.py's four-term logp, [B, T, S]."""
    s_p_sq_r = torch.exp(-2 * logs)
    logp1 = torch.sum(-0.5 * math.log(2 * math.pi) - logs, [1]).unsqueeze(-1)
    logp2 = torch.matmul(s_p_sq_r.transpose(1, 2), -0.5 * (z ** 2))
    logp3 = torch.matmul((m * s_p_sq_r).transpose(1, 2), z)
    logp4 = torch.sum(-0.5 * (m ** 2) * s_p_sq_r, [1]).unsqueeze(-1)
    return logp1 + logp2 + logp3 + logp4


def bench_cpu(args):
    rng = np.random.default_rng(args.seed)
    blas = _blas_one_thread()
    repeat = args.repeat or 7
    a = rng.standard_normal((1024, 1024), dtype=np.float32)
    t = _median(lambda: a @ a, 3)
    peak = 2 * 1024 ** 3 / t / 1e9
    rows = []
    states, mix, dim, n = 500, 16, 36, 1000
    mu, var, lw, sizes = _gmm_model(rng, states, mix, dim)
    model = likelihood.GMM(mu, var, lw, sizes)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    flops = 2.0 * n * states * mix * (2 * dim + 1)
    t1 = _median(lambda: model.loglik(x, threads=1), repeat)
    tall = _median(lambda: model.loglik(x), repeat)
    tnp = _median(lambda: _numpy_gmm(x, model.coef, states, mix), repeat)
    row = {"work": f"GMM {states} x {mix}, J={dim}, N={n}, float32", "ours_1t_ms": t1 * 1e3,
           "ours_all_ms": tall * 1e3, "numpy_ms": tnp * 1e3, "gflops_1t": flops / t1 / 1e9,
           "target": ">= 3x NumPy, one core"}
    err = float(np.max(np.abs(model.loglik(x) - _numpy_gmm(x.astype(np.float64),
                                                           model.coef.astype(np.float64),
                                                           states, mix))))
    row["max_abs_diff_vs_numpy_f64"] = err
    try:
        import torch

        torch.set_num_threads(1)
        xt, ct = torch.from_numpy(x), torch.from_numpy(model.coef)
        row["torch_ms"] = _median(lambda: _torch_gmm(torch, xt, ct, states, mix), repeat) * 1e3
    except ImportError:
        torch = None
        row["torch_ms"] = None
    rows.append(row)
    _progress(f"{row['work']}: libmas {t1 * 1e3:.2f} ms (1 thread), NumPy {tnp * 1e3:.2f} ms")
    if torch is not None:
        b, t_, s, d = 8, 128, 512, 80
        z = torch.randn(b, d, s)
        m = torch.randn(b, d, t_)
        logs = 0.3 * torch.randn(b, d, t_)
        tflops = 2.0 * b * t_ * s * (2 * d + 1)
        t1 = _median(lambda: likelihood.gaussian_loglik(z, m, logs, threads=1), repeat)
        tall = _median(lambda: likelihood.gaussian_loglik(z, m, logs), repeat)
        tt = _median(lambda: _torch_glow(torch, z, m, logs), repeat)
        rows.append({"work": f"Glow-TTS logp B={b} T={t_} S={s} D={d}", "ours_1t_ms": t1 * 1e3,
                     "ours_all_ms": tall * 1e3, "numpy_ms": None, "torch_ms": tt * 1e3,
                     "gflops_1t": tflops / t1 / 1e9, "target": "-"})
        _progress(f"{rows[-1]['work']}: libmas {t1 * 1e3:.2f} ms, PyTorch {tt * 1e3:.2f} ms")
    lines = [f"one-thread float32 GEMM (NumPy BLAS, 1024^3): {peak:.1f} GFLOP/s, the ceiling; "
             f"BLAS limited by {blas}", "",
             "| work | libmas 1 thread (ms) | libmas all cores (ms) | NumPy 1 thread (ms) "
             "| PyTorch 1 thread (ms) | speed-up vs NumPy (1 thread) | GFLOP/s 1 thread "
             "(% of GEMM ceiling) | target |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        npm = f"{r['numpy_ms']:.2f}" if r["numpy_ms"] else "-"
        tm = f"{r['torch_ms']:.2f}" if r["torch_ms"] else "-"
        base = r["numpy_ms"] or r["torch_ms"]
        sp = f"{base / r['ours_1t_ms']:.1f}x" + ("" if r["numpy_ms"] else " (vs PyTorch)")
        lines.append(f"| {r['work']} | {r['ours_1t_ms']:.2f} | {r['ours_all_ms']:.2f} | {npm} | "
                     f"{tm} | {sp} | {r['gflops_1t']:.1f} ({100 * r['gflops_1t'] / peak:.0f}%) "
                     f"| {r['target']} |")
    return rows, "\n".join(lines)


def _gpu_ms(torch, fn, repeat):
    pairs = []
    for k in range(repeat + 3):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        if k >= 3:
            pairs.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs)


def _peak_extra_mb(torch, fn):
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 1e6


def bench_cuda(args):
    import torch

    if not torch.cuda.is_available() or not _C.has_cuda():
        raise SystemExit("bench --likelihood --device cuda: needs a CUDA device and libmas "
                         "built with CUDA")
    repeat = args.repeat or 50
    rng = np.random.default_rng(args.seed)
    peaks = _peaks.device_peaks(torch)
    rows = []
    n, dim = 256, 36
    for states, mix, prec, target in ((5000, 256, "float32", 1.5), (5000, 256, "tf32", 0.5),
                                      (5000, 16, "float32", 0.15)):
        mu, var, lw, sizes = _gmm_model(rng, states, mix, dim)
        model = likelihood.GMM(*(torch.from_numpy(a).cuda() for a in (mu, var, lw)), sizes)
        x = torch.randn(n, dim, device="cuda")
        flops = 2.0 * n * states * mix * (2 * dim + 1)
        ours = _gpu_ms(torch, lambda: model.loglik(x, precision=prec), repeat)
        ours_mb = _peak_extra_mb(torch, lambda: model.loglik(x, precision=prec))
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        ref = _gpu_ms(torch, lambda: _torch_gmm(torch, x, model.coef, states, mix), repeat)
        ref_mb = _peak_extra_mb(torch, lambda: _torch_gmm(torch, x, model.coef, states, mix))
        theirs = _torch_gmm(torch, x, model.coef, states, mix)
        torch.backends.cuda.matmul.allow_tf32 = False
        want = _torch_gmm(torch, x.double(), model.coef.double(), states, mix)
        err = float((model.loglik(x, precision=prec).double() - want).abs().max())
        torch_err = float((theirs.double() - want).abs().max())
        row = {"work": f"GMM {states} x {mix}, J={dim}, N={n}, {prec}", "ours_ms": ours,
               "torch_ms": ref, "ours_mb": ours_mb, "torch_mb": ref_mb,
               "tflops": flops / ours / 1e9, "peak": peaks[prec], "target_ms": target,
               "max_abs_err": err, "torch_err": torch_err, "rtf": ours / 1e3 / (n / 100.0)}
        rows.append(row)
        _progress(f"{row['work']}: libmas {ours:.3f} ms, PyTorch {ref:.3f} ms")
        del model
    b, t, s, d = 32, 512, 2048, 80
    z = torch.randn(b, d, s, device="cuda")
    m = torch.randn(b, d, t, device="cuda")
    logs = 0.3 * torch.randn(b, d, t, device="cuda")
    flops = 2.0 * b * t * s * (2 * d + 1)
    want = _torch_glow(torch, z.double(), m.double(), logs.double())
    for prec in ("float32", "tf32"):
        def ours_fn():
            return likelihood.gaussian_loglik(z, m, logs, precision=prec)

        ours = _gpu_ms(torch, ours_fn, repeat)
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        ref = _gpu_ms(torch, lambda: _torch_glow(torch, z, m, logs), repeat)
        torch_err = float((_torch_glow(torch, z, m, logs).double() - want).abs().max())
        torch_mb = _peak_extra_mb(torch, lambda: _torch_glow(torch, z, m, logs))
        torch.backends.cuda.matmul.allow_tf32 = False
        err = float((ours_fn().double() - want).abs().max())
        rows.append({"work": f"Glow-TTS logp B={b} T={t} S={s} D={d}, {prec}", "ours_ms": ours,
                     "torch_ms": ref, "ours_mb": _peak_extra_mb(torch, ours_fn),
                     "torch_mb": torch_mb, "tflops": flops / ours / 1e9, "peak": peaks[prec],
                     "target_ms": 0.25, "max_abs_err": err, "torch_err": torch_err, "rtf": None})
        _progress(f"{rows[-1]['work']}: libmas {ours:.3f} ms, PyTorch {ref:.3f} ms")
    del want
    # The floor of both rows: writing the [B, T, S] output at the device's
    # copy bandwidth (measured here; it counts the bytes read and written).
    from .bench import cuda_copy_bandwidth

    out_bytes = 4.0 * b * t * s
    write_floor = out_bytes / (cuda_copy_bandwidth(torch) * 1e9) * 1e3
    # The ceiling of that row: cuBLAS's FP32 GEMM of the same product, the
    # coefficient rows [T, 2D+1] times the expanded frames [2D+1, S] (the
    # default precision's fma chain keeps it on CUDA cores, so TF32 off).
    coef = torch.randn(b, t, 2 * d + 1, device="cuda")
    expanded = torch.randn(b, 2 * d + 1, s, device="cuda")
    product = torch.empty(b, t, s, device="cuda")
    gemm = _gpu_ms(torch, lambda: torch.bmm(coef, expanded, out=product), repeat)
    del coef, expanded, product
    lines = [f"peaks: {peaks['source']}", "",
             "| work | libmas (ms) | PyTorch (ms) | target (ms) | TFLOP/s (% of peak) "
             "| peak extra MB libmas / PyTorch | max abs err vs float64 libmas / PyTorch |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['work']} | {r['ours_ms']:.3f} | {r['torch_ms']:.3f} | "
                     f"{r['target_ms']} | {r['tflops']:.1f}{_peaks.percent(r['tflops'], r['peak'])}"
                     f" | {r['ours_mb']:.0f} / {r['torch_mb']:.0f} | "
                     f"{r['max_abs_err']:.3g} / {r['torch_err']:.3g} |")
    lines.append("")
    lines.append(f"real-time factor of the first row at 100 frames/s: {rows[0]['rtf']:.5f}")
    lines.append(f"Glow-TTS rows' floor: writing the {out_bytes / 1e6:.0f} MB output at the measured "
                 f"copy bandwidth, {write_floor:.3f} ms")
    lines.append(f"Glow-TTS float32 row's ceiling: cuBLAS SGEMM of the same product [{b},{t},{2 * d + 1}] x "
                 f"[{b},{2 * d + 1},{s}] (TF32 off) {gemm:.3f} ms, {flops / gemm / 1e9:.1f} TFLOP/s"
                 f"{_peaks.percent(flops / gemm / 1e9, peaks['float32'])}")
    return rows, "\n".join(lines)


def run(args):
    from .bench import run_table

    return run_table(args, "likelihoods", bench_cuda, bench_cpu)
