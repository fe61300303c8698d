"""``python -m libmas bench``: time hard MAS against a baseline in the same run.

CPU (default): B=32, S=ratio*T, T=128..1024, standard-normal float32 input.
For each T: libmas with all threads (or --threads) and with one thread, the
plain scalar column loop Glow-TTS runs (``_C.baseline_glow``, in place on a
float32 copy, the copy and zeroing untimed), speed-ups, and the bandwidth
achieved (bytes of the value read plus outputs written, per second) next to
the machine's copy bandwidth measured in the same run.

CUDA (--device cuda): T=128..2048, dense float32 path output; GPU time
between CUDA events around each call (median of many, no CUDA graph), with a
spin kernel queued first so the host's launch overhead is not counted; the
same for the Triton Super-MAS kernel when ``super_monotonic_align`` is
importable (it overwrites its input, so it gets a fresh clone, untimed).

Times are medians of --repeat runs after a warm-up. The markdown table is
printed last.
"""

import datetime
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

from . import _C, __version__, _arrays, hard

CUDA_TARGETS_MS = {128: 0.025, 256: 0.06, 512: 0.20, 1024: 0.80, 2048: 3.0}


def _median_time(fn, repeat, setup=None):
    """Median wall time of fn() over `repeat` runs after one warm-up; setup()
    runs before each, untimed."""
    times = []
    for k in range(repeat + 1):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        if k > 0:
            times.append(elapsed)
    return statistics.median(times)


def cpu_copy_bandwidth(nbytes=256 << 20, repeat=5):
    """GB/s of a large np.copyto (bytes read + bytes written)."""
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    t = _median_time(lambda: np.copyto(dst, src), repeat)
    return 2 * src.nbytes / t / 1e9


def _cpu_value(rng, shape, dtype):
    base = rng.standard_normal(shape, dtype=np.float32)
    if dtype == "bfloat16":
        import torch

        return torch.from_numpy(base).to(torch.bfloat16)
    return base.astype(dtype)


def _outputs(frame, value, output, batch, tokens):
    if output == "path":
        return (frame.empty(tuple(value.shape), value.dtype), None, None, None)
    return (None, frame.empty((batch, tokens), frame.native_dtype("int32", None)), None, None)


def _nbytes(arr):
    if hasattr(arr, "element_size"):
        return arr.element_size() * arr.numel()
    return arr.nbytes


def bench_cpu(args):
    rng = np.random.default_rng(args.seed)
    threads = args.threads if args.threads else 0
    copy_bw = cpu_copy_bandwidth()
    rows = []
    for T in args.T:
        B, S = args.batch, args.ratio * T
        value = _cpu_value(rng, (B, T, S), args.dtype)
        frame, value = _arrays.frame_for(value, "bench")
        code = _arrays.value_code(frame, value, "bench")
        x_len = frame.lengths(np.full(B, T), B, "x")
        y_len = frame.lengths(np.full(B, S), B, "y")
        outs = _outputs(frame, value, args.output, B, T)

        def ours(n):
            return lambda: hard._run("bench", frame, value, code, x_len, y_len, False, outs, n)

        t_all = _median_time(ours(threads), args.repeat)
        t_one = _median_time(ours(1), args.repeat)
        work = np.asarray(value, dtype=np.float32) if frame.name == "numpy" else \
            value.float().numpy()
        glow_v = np.empty((B, T, S), dtype=np.float32)
        glow_p = np.empty((B, T, S), dtype=np.int32)
        x64, y64 = np.full(B, T, np.int64), np.full(B, S, np.int64)

        def glow_setup():
            np.copyto(glow_v, work)
            glow_p.fill(0)

        t_glow = _median_time(lambda: _C.baseline_glow(glow_v.__dlpack__(), glow_p.__dlpack__(),
                                                       x64.__dlpack__(), y64.__dlpack__()),
                              args.repeat, glow_setup)
        # The kernel reads only the band of cells a path can cross,
        # T * (S - T + 1) per item, and writes the outputs.
        band_bytes = B * T * (S - T + 1) * (_nbytes(value) // (B * T * S))
        nbytes = band_bytes + sum(_nbytes(a) for a in outs if a is not None)
        rows.append({
            "T": T, "S": S, "B": B,
            "ours_ms": t_all * 1e3, "ours_1t_ms": t_one * 1e3, "glow_ms": t_glow * 1e3,
            "speedup_1t": t_glow / t_one, "speedup_all": t_glow / t_all,
            "thread_scaling": t_one / t_all,
            "gbs": nbytes / t_all / 1e9, "copy_gbs": copy_bw,
        })
        _progress(f"T={T}: ours {t_all * 1e3:.2f} ms, 1 thread {t_one * 1e3:.2f} ms, "
                  f"Glow loop {t_glow * 1e3:.2f} ms")
    return rows, copy_bw


def _progress(text):
    print(text, file=sys.stderr, flush=True)


def cpu_table(rows, args):
    threads = args.threads if args.threads else os.cpu_count()
    lines = [
        f"| T | S | libmas, {threads} threads (ms) | libmas, 1 thread (ms) | Glow-TTS loop (ms) "
        "| speed-up 1 thread | speed-up all | thread scaling | GB/s (% of copy) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['T']} | {r['S']} | {r['ours_ms']:.3f} | {r['ours_1t_ms']:.3f} | "
            f"{r['glow_ms']:.2f} | {r['speedup_1t']:.1f}x | {r['speedup_all']:.1f}x | "
            f"{r['thread_scaling']:.2f}x | {r['gbs']:.2f} "
            f"({100 * r['gbs'] / r['copy_gbs']:.0f}% of {r['copy_gbs']:.1f} GB/s) |")
    return "\n".join(lines)


# --------------------------------------------------------------------- CUDA

def _gpu_times(torch, fn, repeat, setup=None):
    """Median GPU milliseconds between events around fn(), each run behind a
    spin kernel so the events measure the device, not the host."""
    spin = getattr(torch.cuda, "_sleep", None)
    pairs = []
    for k in range(repeat + 3):
        if setup is not None:
            setup()
        if spin is not None:
            spin(2_000_000)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        if k >= 3:
            pairs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs)


def cuda_copy_bandwidth(torch, nbytes=1 << 30):
    src = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = _gpu_times(torch, lambda: dst.copy_(src), 10)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def _super_mas():
    try:
        from super_monotonic_align import maximum_path
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return None
    return maximum_path


def bench_cuda(args):
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("bench --device cuda: no CUDA device visible to PyTorch")
    if not _C.has_cuda():
        raise SystemExit("bench --device cuda: libmas was built without its CUDA backend")
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    copy_bw = cuda_copy_bandwidth(torch)
    smas = _super_mas()
    rows = []
    for T in args.T:
        B, S = args.batch, args.ratio * T
        value = torch.randn((B, T, S), generator=gen, device="cuda", dtype=torch.float32).to(dtype)
        frame, value = _arrays.frame_for(value, "bench")
        code = _arrays.value_code(frame, value, "bench")
        x_len = torch.full((B,), T, dtype=torch.int64, device="cuda")
        y_len = torch.full((B,), S, dtype=torch.int64, device="cuda")
        if args.output == "path":
            outs = (torch.empty((B, T, S), dtype=torch.float32, device="cuda"), None, None, None)
        else:
            outs = (None, torch.empty((B, T), dtype=torch.int32, device="cuda"), None, None)
        ms = _gpu_times(torch, lambda: hard._run("bench", frame, value, code, x_len, y_len,
                                                 False, outs, 0), args.repeat)
        row = {"T": T, "S": S, "B": B, "ours_ms": ms,
               "gbs": sum(_nbytes(a) for a in (value,) + outs if a is not None) / (ms * 1e-3) / 1e9, "copy_gbs": copy_bw,
               "target_ms": CUDA_TARGETS_MS.get(T), "smas_ms": None}
        if smas is not None:
            mask = torch.ones((B, T, S), dtype=torch.bool, device="cuda")
            fresh = {}

            def setup():
                fresh["v"] = value.float().clone()

            row["smas_ms"] = _gpu_times(torch, lambda: smas(fresh["v"], mask), args.repeat, setup)
        rows.append(row)
        _progress(f"T={T}: ours {ms:.4f} ms" + (
            f", Super-MAS {row['smas_ms']:.3f} ms" if row["smas_ms"] else ""))
        del value, outs
    return rows, copy_bw


def cuda_table(rows):
    lines = [
        "| T | S | libmas (ms) | target (ms) | GB/s | % of copy bandwidth | Super-MAS (ms) "
        "| speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        target = f"{r['target_ms']}" if r["target_ms"] else "-"
        smas = f"{r['smas_ms']:.3f}" if r["smas_ms"] else "n/a"
        speed = f"{r['smas_ms'] / r['ours_ms']:.0f}x" if r["smas_ms"] else "-"
        lines.append(
            f"| {r['T']} | {r['S']} | {r['ours_ms']:.4f} | {target} | {r['gbs']:.0f} | "
            f"{100 * r['gbs'] / r['copy_gbs']:.0f}% of {r['copy_gbs']:.0f} GB/s | {smas} | {speed} |")
    return "\n".join(lines)


# ------------------------------------------------------------------ output

def run_table(args, what, bench_cuda, bench_cpu):
    """bench_cuda(args) or bench_cpu(args) by args.device, each returning
    (rows, markdown table); prints the table under a line naming libmas, what
    is timed, the device and the time, and the command. Returns the rows."""
    rows, table = bench_cuda(args) if args.device == "cuda" else bench_cpu(args)
    if args.device == "cuda":
        import torch

        device = torch.cuda.get_device_name()
    else:
        device = f"{_cpu_name()}, {os.cpu_count()} cores"
    print(f"libmas {__version__} (C {_C.version()}) {what} on {device}, "
          f"{datetime.datetime.now().isoformat(timespec='seconds')}")
    print("command: python -m libmas " + " ".join(sys.argv[1:]) + "\n")
    print(table)
    return rows


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _device_name(args):
    if args.device == "cuda":
        import torch

        return torch.cuda.get_device_name()
    return f"{_cpu_name()}, {os.cpu_count()} cores"


def plot(rows, args, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not importable: skipping the plot {path}")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    ts = [r["T"] for r in rows]
    series = ([("libmas", "ours_ms"), ("libmas, 1 thread", "ours_1t_ms"),
               ("Glow-TTS loop", "glow_ms")] if args.device == "cpu"
              else [("libmas", "ours_ms"), ("target", "target_ms"), ("Super-MAS", "smas_ms")])
    for label, key in series:
        pts = [(t, r[key]) for t, r in zip(ts, rows) if r.get(key)]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(f"T (tokens), S = {args.ratio} T, B = {args.batch}")
    ax.set_ylabel("time (ms)")
    ax.set_title(f"hard MAS, {args.dtype}, {args.device}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def run(args):
    if args.device == "cpu":
        rows, copy_bw = bench_cpu(args)
        table = cpu_table(rows, args)
    else:
        rows, copy_bw = bench_cuda(args)
        table = cuda_table(rows)
    header = {
        "libmas": __version__, "c_library": _C.version(), "cuda_backend": bool(_C.has_cuda()),
        "device": _device_name(args), "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": "python -m libmas " + " ".join(sys.argv[1:]),
        "dtype": args.dtype, "output": args.output, "batch": args.batch, "ratio": args.ratio,
        "repeat": args.repeat, "copy_gbs": copy_bw,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**header, "rows": rows}, f, indent=2)
    if args.plot:
        plot(rows, args, args.plot)
    print(f"libmas {header['libmas']} (C {header['c_library']}, CUDA backend "
          f"{'yes' if header['cuda_backend'] else 'no'}) on {header['device']}, {header['date']}")
    print(f"command: {header['command']}")
    print(f"B={args.batch}, S={args.ratio}T, {args.dtype} standard normal, {args.output} output, "
          f"median of {args.repeat}; copy bandwidth {copy_bw:.1f} GB/s\n")
    print(table)
    return rows
