"""One side of an A/B timing of align_gaussian on CUDA (bench/gpu_ab.sh runs
it on two builds alternately, on one machine: across fresh machines of one
kind the same build's forward moved 2-5 us at T=150 and ~20 us at T=512,
more than most changes it had to judge; results/fused-gpu-h100.md, session
19).

For each shape (SHAPES="B,T,S;...", D=80, full lengths) and precision:
the wall a call (best of three loops of N back-to-back calls, every wall
before any profiler session), the host's time a call (the same calls
enqueued without waiting: where it nears the wall, the wall is the host's),
whether the result is the unfused path's bit for bit, and a hash of the
indices and scores (equal on both sides when a change keeps the bits);
then each kernel's time a call (torch.profiler). Uses only what both sides'
packages have: the base must be at or after 85d89a3 (bench_fused's
_host_ms). Nothing here is a test."""

import hashlib
import os

import numpy as np
import torch

from libmas import fused, hard, likelihood
from libmas.bench_fused import _host_ms, _inputs
from libmas.bench_topology_cuda import _kernels_ms, _loop_ms


def main():
    shapes = [tuple(int(v) for v in s.split(",")) for s in
              os.environ.get("SHAPES", "32,150,800;32,512,2048;16,1024,4096").split(";")]
    n = int(os.environ.get("N", "40"))
    rng = np.random.default_rng(5)
    calls = {}
    print("| shape | precision | wall (ms) | host a call (ms) | same as unfused | hash |")
    print("|---|---|---|---|---|---|")
    for b, t, s in shapes:
        z, m, ls, _, _ = (torch.from_numpy(a).cuda() for a in _inputs(rng, b, t, s))
        x = torch.full((b,), t, device="cuda", dtype=torch.int64)
        y = torch.full((b,), s, device="cuda", dtype=torch.int64)
        for prec in ("float32", "tf32"):
            def f(prec=prec, z=z, m=m, ls=ls, x=x, y=y):
                return fused.align_gaussian(z, m, ls, x, y, precision=prec).indices
            calls[(b, t, s, prec)] = f
            wall = min(_loop_ms(torch, f, n) for _ in range(3))
            host = _host_ms(torch, f, n)
            r = fused.align_gaussian(z, m, ls, x, y, precision=prec)
            r2 = hard.align(likelihood.gaussian_loglik(z, m, ls, x, y, precision=prec), x, y)
            same = bool(torch.equal(r.indices, r2.indices) and torch.equal(r.score, r2.score))
            h = hashlib.sha1(r.indices.cpu().numpy().tobytes() +
                             r.score.cpu().numpy().tobytes()).hexdigest()[:10]
            print(f"| B={b} T={t} S={s} | {prec} | {wall:.4f} | {host:.4f} | "
                  f"{'yes' if same else 'NO'} | {h} |", flush=True)
    print()
    for (b, t, s, prec), f in calls.items():
        k = _kernels_ms(torch, f, n)
        print(f"- kernels B={b} T={t} S={s} {prec}: {sum(k.values()) * 1e3:.1f} us: " +
              ", ".join(f"{name.split('(')[0][-32:]} {v * 1e3:.1f}"
                        for name, v in sorted(k.items(), key=lambda kv: -kv[1])), flush=True)


if __name__ == "__main__":
    main()
