"""Host enqueue time, wall time and GPU time (CUDA events) per call of
align at B=16 T=60 S=300, through the glue and the general path, next to
torch.empty, a tiny PyTorch kernel and the C call alone; 2000 back-to-back
calls a row. Shows whether a loop is host- or GPU-bound and how fast the
host is right now. Run on a GPU machine with libmas importable:
    python3 bench/host_gaps.py"""

import time

import torch

import libmas
from libmas import _C, _fast

dev = torch.device("cuda")
B, T, S = 16, 60, 300
v = torch.randn(B, T, S, device=dev)
xl = torch.full((B,), T, dtype=torch.int64, device=dev)
yl = torch.full((B,), S, dtype=torch.int64, device=dev)
def measure(name, fn, n=2000):
    for _ in range(50): fn()
    torch.cuda.synchronize()
    e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter(); e0.record()
    for _ in range(n): fn()
    e1.record(); t1 = time.perf_counter()
    torch.cuda.synchronize(); t2 = time.perf_counter()
    print(f"{name:40s} enqueue {1e6*(t1-t0)/n:6.2f} us  wall {1e6*(t2-t0)/n:6.2f} us  gpu(events) {1e3*e0.elapsed_time(e1)/n:6.2f} us")
measure("align glue", lambda: libmas.align(v, xl, yl).durations)
_fast.ENABLED = False
measure("align general", lambda: libmas.align(v, xl, yl).durations)
_fast.ENABLED = True
glue = _fast.available()
raw = torch._C._cuda_getCurrentRawStream(0)
measure("glue.align alone", lambda: glue.align(v, xl, yl, False, 0, raw, 0))
d = torch.empty((B,T), dtype=torch.int32, device=dev)
measure("torch.empty only", lambda: torch.empty((B,T), dtype=torch.int32, device=dev))
measure("tiny torch kernel (d.zero_())", lambda: d.zero_())
# the launch alone: the C call with prebuilt handles
h = torch.utils.dlpack.to_dlpack
idx = torch.empty((B, S), dtype=torch.int32, device=dev); sc = torch.empty((B,), device=dev)
work = torch.empty((_C.hard_cuda_workspace_size(B, T, S, _C.FLOAT32),), dtype=torch.uint8, device=dev)
word = torch.full((1,), -1, dtype=torch.int64, device=dev)
hv, hx, hy, hd, hi, hs, hw, hword = (h(a) for a in (v, xl, yl, d, idx, sc, work, word))
measure("_C.hard_cuda prebuilt", lambda: _C.hard_cuda(hv, False, hx, hy, None, hd, hi, hs, hw, raw, hword))
