"""``python -m libmas bench --calls``: the cost of a call at training shapes.

For B=16 T=60 S=300, B=32 T=128 S=512, B=32 T=150 S=800, B=32 T=512 S=2048
(float32, full lengths) and every public op:

CUDA (--device cuda): wall time per call over a loop of back-to-back calls
(synchronised before and after the loop; the best of 5 rounds over the ops
of a shape, each round the best of 3 loops), the kernels' time per call from
torch.profiler (sum of the CUDA kernel times of the loop's calls / calls;
copies and memsets are not kernels), overhead = wall - kernels, and the wall
time of Triton Super-MAS (``super_monotonic_align.maximum_path``, same loop;
it overwrites its input, so it runs on one scratch copy) when importable,
and for the ops that libmas._torch takes, the wall time of the general
path (the same call with the glue switched off).
Targets printed next to the numbers: overhead <= 15 us for every op;
align().durations at B=32 T=150 S=800 <= 0.05 ms; maximum_path there
<= 0.07 ms.

CPU (--device cpu): NumPy input, threads=None: wall per call of the public
function, wall per call of the C call alone (libmas._C with prebuilt
arguments, outputs and workspace) and their difference, the Python
overhead; plus PyTorch CPU tensors through the direct path (what eager
calls take: libmas._torch for align and the attentions when it is built)
and through the registered custom op (what tracers take), and
a tiny shape (B=1 T=4 S=8) where the overhead is all there is.
"""

import datetime
import sys
import time

import numpy as np

from . import _C, _fast, _ops, __version__

SHAPES = [(16, 60, 300), (32, 128, 512), (32, 150, 800), (32, 512, 2048)]
TINY = (1, 4, 8)
OVERHEAD_TARGET_US = 15.0
ROUNDS = 5  # CUDA wall times: best of this many rounds over the ops of a shape
WALL_TARGETS_MS = {((32, 150, 800), "align().durations"): 0.05,
                   ((32, 150, 800), "maximum_path"): 0.07}
# Ops whose eager tensor calls go through libmas._torch (libmas._fast).
GLUE_OPS = ("align().durations", "monotonic_attention", "monotonic_attention_m2m")
OPS = ["maximum_path", "align().durations", "forward_sum", "posterior",
       "monotonic_attention", "monotonic_attention_m2m"]


def _calls(libmas, value, mask, x_len, y_len, threads=None):
    """op name -> zero-argument call of the public function."""
    return {
        "maximum_path": lambda: libmas.maximum_path(value, mask),
        "align().durations": lambda: libmas.align(value, x_len, y_len, threads=threads).durations,
        "forward_sum": lambda: libmas.forward_sum(value, x_len, y_len, threads=threads),
        "posterior": lambda: libmas.posterior(value, x_len, y_len, threads=threads),
        "monotonic_attention": lambda: libmas.monotonic_attention(value, threads=threads),
        "monotonic_attention_m2m": lambda: libmas.monotonic_attention_m2m(value, threads=threads),
    }


def _c_alone(value, x_len, y_len, mask_dtype=np.float32):
    """op name -> the C call alone with prebuilt capsules (NumPy, CPU, every
    core): what the public function costs without its Python."""
    B, T, S = value.shape
    code = _C.FLOAT32
    cap = np.ndarray.__dlpack__
    v, x, y = cap(value), cap(x_len), cap(y_len)
    path = np.empty((B, T, S), mask_dtype)
    dur = np.empty((B, T), np.int32)
    log_z = np.empty((B,), np.float32)
    post = np.empty((B, T, S), np.float32)
    log_phi = np.empty((B, T, S), np.float32)
    hw = np.empty((max(_C.hard_cpu_workspace_size(B, T, S, code, 0), 1),), np.uint8)
    fw = np.empty((max(_C.soft_workspace_size(0, False, B, T, S, code, 0), 1),), np.uint8)
    aw = np.empty((max(_C.soft_workspace_size(1, False, B, T, S, code, 0), 1),), np.uint8)
    p, d, lz, po, lp = cap(path), cap(dur), cap(log_z), cap(post), cap(log_phi)
    h, f, a = cap(hw), cap(fw), cap(aw)
    return {
        "maximum_path": lambda: _C.hard_cpu(v, False, x, y, p, None, None, None, h, 0),
        "align().durations": lambda: _C.hard_cpu(v, False, x, y, None, d, None, None, h, 0),
        "forward_sum": lambda: _C.forward_sum(False, v, False, x, y, lz, None, f, 0, None),
        "posterior": lambda: _C.forward_sum(False, v, False, x, y, None, po, f, 0, None),
        "monotonic_attention": lambda: _C.attention(False, False, 0, v, None, None, lp, None,
                                                    None, a, 0, None),
        "monotonic_attention_m2m": lambda: _C.attention(False, False, 1, v, None, None, lp,
                                                        None, None, a, 0, None),
    }


def _host_per_call(fn, budget_s, most=20000):
    """Seconds per call of fn over a loop sized to about budget_s (best of 3)."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    n = int(min(most, max(3, budget_s / once / 3)))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def _progress(text):
    print(text, file=sys.stderr, flush=True)


def _inputs(rng, shape):
    B, T, S = shape
    value = rng.standard_normal((B, T, S), dtype=np.float32)
    return value, np.ones((B, T, S), np.float32), np.full(B, T, np.int64), np.full(B, S, np.int64)


def bench_cpu(args):
    import libmas

    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            torch = None
    rng = np.random.default_rng(args.seed)
    rows = []
    budget = args.budget
    for shape in [TINY] + _shapes(args):
        value, mask, x_len, y_len = _inputs(rng, shape)
        numpy_calls = _calls(libmas, value, mask, x_len, y_len)
        alone = _c_alone(value, x_len, y_len)
        torch_calls = None
        if torch is not None:
            tv, tm = torch.from_numpy(value), torch.from_numpy(mask)
            tx, ty = torch.from_numpy(x_len), torch.from_numpy(y_len)
            torch_calls = _calls(libmas, tv, tm, tx, ty)
        for op in OPS:
            row = {"shape": shape, "op": op}
            row["wall_us"] = _host_per_call(numpy_calls[op], budget) * 1e6
            row["c_us"] = _host_per_call(alone[op], budget) * 1e6
            row["overhead_us"] = row["wall_us"] - row["c_us"]
            if torch_calls is not None:
                row["torch_direct_us"] = _host_per_call(torch_calls[op], budget) * 1e6
                _ops.ALWAYS = True
                try:
                    row["torch_op_us"] = _host_per_call(torch_calls[op], budget) * 1e6
                finally:
                    _ops.ALWAYS = False
            rows.append(row)
            _progress(f"{_shape_text(shape)} {op}: NumPy {row['wall_us']:.1f} us, "
                      f"C alone {row['c_us']:.1f} us")
    return rows


def _shapes(args):
    if args.T:
        return [s for s in SHAPES if s[1] in args.T]
    return list(SHAPES)


def _shape_text(shape):
    return f"B={shape[0]} T={shape[1]} S={shape[2]}"


def cpu_table(rows):
    lines = [
        "| shape | op | NumPy wall (us) | C call alone (us) | overhead (us) "
        "| torch CPU, direct (us) | torch CPU, registered op (us) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        direct = f"{r['torch_direct_us']:.1f}" if "torch_direct_us" in r else "n/a"
        via_op = f"{r['torch_op_us']:.1f}" if "torch_op_us" in r else "n/a"
        lines.append(f"| {_shape_text(r['shape'])} | {r['op']} | {r['wall_us']:.1f} | "
                     f"{r['c_us']:.1f} | {r['overhead_us']:.1f} | {direct} | {via_op} |")
    return "\n".join(lines)


# --------------------------------------------------------------------- CUDA

def _kernel_seconds(torch, fn, calls):
    """Sum of CUDA kernel times of `calls` calls of fn / calls (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total_us = 0.0
    for event in prof.events():
        if str(getattr(event, "device_type", "")).endswith("CUDA"):
            name = event.name.lower()
            if name.startswith("memcpy") or name.startswith("memset"):
                continue
            total_us += getattr(event, "device_time", None) or getattr(event, "cuda_time", 0.0)
    return total_us * 1e-6 / calls


def _wall_seconds(torch, fn, calls):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def bench_cuda(args):
    import torch

    import libmas

    if not torch.cuda.is_available():
        raise SystemExit("bench --device cuda: no CUDA device visible to PyTorch")
    if not _C.has_cuda():
        raise SystemExit("bench --device cuda: libmas was built without its CUDA backend")
    from .bench import _super_mas

    smas = _super_mas()
    glue = _fast.available() is not None
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    rows = []
    for shape in _shapes(args):
        B, T, S = shape
        value = torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32)
        mask = torch.ones(shape, device="cuda", dtype=torch.float32)
        x_len = torch.full((B,), T, dtype=torch.int64, device="cuda")
        y_len = torch.full((B,), S, dtype=torch.int64, device="cuda")
        calls = _calls(libmas, value, mask, x_len, y_len)
        smas_ms = None
        if smas is not None:
            scratch = value.clone()
            smas_mask = torch.ones(shape, device="cuda", dtype=torch.bool)
            smas_ms = _wall_seconds(torch, lambda: smas(scratch, smas_mask), args.calls_n) * 1e3
        # Wall times: the best of ROUNDS rounds over every op (and the general
        # path), so that a slow spell of the host shows in one round of each
        # op instead of in every loop of one op.
        best = {}
        for _ in range(ROUNDS):
            for op in OPS:
                paths = (True, False) if glue and op in GLUE_OPS else (True,)
                for fast in paths:
                    _fast.ENABLED = fast
                    try:
                        wall = _wall_seconds(torch, calls[op], args.calls_n)
                    finally:
                        _fast.ENABLED = True
                    best[op, fast] = min(best.get((op, fast), wall), wall)
        for op in OPS:
            wall = best[op, True]
            kernels = _kernel_seconds(torch, calls[op], args.calls_n)
            general = best.get((op, False))
            libmas.check_errors()
            row = {"shape": shape, "op": op, "wall_ms": wall * 1e3, "kernel_ms": kernels * 1e3,
                   "overhead_us": (wall - kernels) * 1e6,
                   "general_ms": None if general is None else general * 1e3,
                   "wall_target_ms": WALL_TARGETS_MS.get((shape, op)),
                   "smas_ms": smas_ms if op in ("maximum_path", "align().durations") else None}
            rows.append(row)
            _progress(f"{_shape_text(shape)} {op}: wall {row['wall_ms']:.4f} ms, kernels "
                      f"{row['kernel_ms']:.4f} ms, overhead {row['overhead_us']:.1f} us")
        del value, mask
    return rows


def cuda_table(rows):
    lines = [
        "| shape | op | wall / call (ms) | kernels / call (ms) | overhead (us) | overhead "
        f"<= {OVERHEAD_TARGET_US:g} us | wall target (ms) | Super-MAS wall (ms) "
        "| general path wall (ms) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ok = "yes" if r["overhead_us"] <= OVERHEAD_TARGET_US else "NO"
        target = "-"
        if r["wall_target_ms"] is not None:
            met = "met" if r["wall_ms"] <= r["wall_target_ms"] else "NOT met"
            target = f"<= {r['wall_target_ms']} ({met})"
        smas = f"{r['smas_ms']:.4f}" if r["smas_ms"] is not None else "n/a"
        general = f"{r['general_ms']:.4f}" if r["general_ms"] is not None else "-"
        lines.append(f"| {_shape_text(r['shape'])} | {r['op']} | {r['wall_ms']:.4f} | "
                     f"{r['kernel_ms']:.4f} | {r['overhead_us']:.1f} | {ok} | {target} | "
                     f"{smas} | {general} |")
    return "\n".join(lines)


def run(args):
    from .bench import _device_name

    if args.device == "cpu":
        rows = bench_cpu(args)
        table = cpu_table(rows)
    else:
        rows = bench_cuda(args)
        table = cuda_table(rows)
    date = datetime.datetime.now().isoformat(timespec="seconds")
    print(f"libmas {__version__} (C {_C.version()}, CUDA backend "
          f"{'yes' if _C.has_cuda() else 'no'}) on {_device_name(args)}, {date}")
    print("command: python -m libmas " + " ".join(sys.argv[1:]))
    glue = _fast.available()
    print("PyTorch glue (libmas._torch): " + (f"yes, PyTorch {glue.torch_version}" if glue else
                                               "no (every call takes the general path)"))
    if args.device == "cpu":
        print("float32 standard normal, full lengths, threads=None; host wall per call, "
              "best of 3 loops; overhead = NumPy wall - C call alone\n")
    else:
        print(f"float32 standard normal, full lengths; {args.calls_n} back-to-back calls per "
              f"loop, wall = best of 3 loops in each of {ROUNDS} rounds over the ops; "
              f"overhead = wall - kernels (torch.profiler); targets: overhead <= "
              f"{OVERHEAD_TARGET_US:g} us, align().durations at B=32 T=150 S=800 <= 0.05 ms, "
              f"maximum_path there <= 0.07 ms; general path: the same call without "
              f"libmas._torch (_fast.ENABLED = False)\n")
    print(table)
    return rows
