"""What the best-known FP32 GEMM does on the Glow-TTS log-likelihood's shape.

The Glow-TTS logp of issue 10 (B=32 T=512 S=2048 D=80) is, per item, the
product of the token rows [T, 2D+1] (K, mu/sigma^2, -1/(2 sigma^2)) and the
frame columns [2D+1, S] (1, x, x^2): 2D+1 = 161 multiply-adds a cell in FP32
on CUDA cores (the exactness contract fixes the fma chain, so no tensor
cores in the default precision). cuBLAS's batched SGEMM on exactly that
shape (TF32 off) is the ceiling a hand-written kernel can hope to approach;
this prints its time and TFLOP/s next to the device's FP32 peak, and the
time libmas.gaussian_loglik takes on the same shape in the same run.

Usage: python bench/sgemm_ceiling.py [--B 32 --T 512 --S 2048 --D 80]
(needs PyTorch with CUDA; libmas optional).
"""
import argparse

import torch


def time_ms(fn, reps=50):
    fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(5):
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        torch.cuda.synchronize()
        best = min(best, e0.elapsed_time(e1) / reps)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--B", type=int, default=32)
    ap.add_argument("--T", type=int, default=512)
    ap.add_argument("--S", type=int, default=2048)
    ap.add_argument("--D", type=int, default=80)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    prop = torch.cuda.get_device_properties(dev)
    lanes = 128  # FP32 lanes a multiprocessor (sm_90; the H100's boost clock below)
    clock_ghz = 1.98 if prop.major == 9 else 1.41
    peak = prop.multi_processor_count * lanes * 2 * clock_ghz / 1e3  # TFLOP/s
    K = 2 * a.D + 1
    g = torch.Generator(device=dev).manual_seed(0)
    coef = torch.randn(a.B, a.T, K, device=dev, generator=g)
    ex = torch.randn(a.B, K, a.S, device=dev, generator=g)
    out = torch.empty(a.B, a.T, a.S, device=dev)
    flops = 2.0 * a.B * a.T * a.S * K
    ms = time_ms(lambda: torch.bmm(coef, ex, out=out))
    print(f"device: {prop.name} ({prop.multi_processor_count} SMs); FP32 peak {peak:.1f} TFLOP/s "
          f"at {clock_ghz} GHz; shape B={a.B} T={a.T} S={a.S} D={a.D} (K={K})")
    print("| work | ms | TFLOP/s | % of FP32 peak |")
    print("|---|---|---|---|")
    print(f"| cuBLAS SGEMM bmm [B,T,{K}] x [B,{K},S] (TF32 off) | {ms:.3f} | "
          f"{flops / ms / 1e9:.1f} | {100 * flops / ms / 1e9 / peak:.0f}% |")
    try:
        import libmas
    except ImportError:
        return
    z = torch.randn(a.B, a.D, a.S, device=dev, generator=g)
    mean = torch.randn(a.B, a.D, a.T, device=dev, generator=g)
    log_std = 0.1 * torch.randn(a.B, a.D, a.T, device=dev, generator=g)
    ms2 = time_ms(lambda: libmas.gaussian_loglik(z, mean, log_std))
    print(f"| libmas.gaussian_loglik (default precision) | {ms2:.3f} | "
          f"{flops / ms2 / 1e9:.1f} | {100 * flops / ms2 / 1e9 / peak:.0f}% |")


if __name__ == "__main__":
    main()
