"""One Glow-TTS-shaped training step through libmas, fused and unfused.

The alignment part of a Glow-TTS / VITS / Matcha-TTS step: the text encoder
gives each token a diagonal Gaussian (mean, log_std [B, D, T]), the flow maps
the mel frames to latents z [B, D, S] (with a log-determinant); MAS picks the
monotonic alignment maximising the Gaussian log-likelihood, the token
statistics are expanded to frames along it, and the maximum-likelihood loss is
    (sum of log_std + (z - mean)^2 / (2 var) over frames - logdet) / (D sum S)
    + log(2 pi) / 2.
Encoder and flow are stand-ins of the right shapes (a linear encoder over
random token embeddings, a per-channel affine flow) so that the gradients
reach real parameters.

  fused:   libmas.align_gaussian (the likelihood computed inside the
           alignment, no [B, T, S] matrix) + libmas.expand (gather, backward
           a scatter-add)
  unfused: Glow-TTS's PyTorch logp (four matmuls, [B, T, S]) +
           libmas.maximum_path (dense path) + two [B, S, T] x [B, T, D] matmuls

Each variant runs in its own process (same seed, same inputs) so that its
peak memory can be read: CPU the growth of the peak resident set over the
set-up, CUDA the peak of PyTorch's allocator over the set-up. The script
checks that both give the same loss.

--precision tf32 runs both on CUDA's tensor cores: align_gaussian(...,
precision="tf32") and PyTorch's TF32 matmuls for the unfused logp. The two
round differently, so an alignment may pick another path among near ties;
the losses are then checked to agree within 1e-3 instead. The CPU computes
the default precision either way.

  python examples/glow_tts_step.py                  # B=8 T=100 S=400 D=80, CPU
  python examples/glow_tts_step.py --threads 1 --tokens 256 --frames 1024
  python examples/glow_tts_step.py --device cuda --batch 32 --tokens 512 --frames 2048
  python examples/glow_tts_step.py --device cuda --batch 32 --tokens 512 --frames 2048 \
      --precision tf32
"""

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time


def _parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--frames", type=int, default=400)
    p.add_argument("--channels", type=int, default=80, help="D, mel channels")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--repeat", type=int, default=3, help="timed steps (median)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads of PyTorch and libmas (default: PyTorch's; on a busy "
                        "machine 1 gives steadier times)")
    p.add_argument("--precision", default="float32", choices=("float32", "tf32"),
                   help="tf32: the products on CUDA's tensor cores in both variants")
    p.add_argument("--only", choices=("fused", "unfused"), help=argparse.SUPPRESS)
    return p


def _setup(torch, args):
    """Inputs and the stand-in model, the same for a seed."""
    g = torch.Generator().manual_seed(args.seed)
    b, t, s, d = args.batch, args.tokens, args.frames, args.channels
    dev = torch.device(args.device)
    emb = torch.randn(b, t, 192, generator=g)                        # token embeddings
    mel = torch.randn(b, d, s, generator=g)                          # mel frames
    x_len = torch.randint(max(1, t * 6 // 10), t + 1, (b,), generator=g)
    x_len[0] = t
    y_len = torch.minimum(torch.full((b,), s), x_len * s // t)
    y_len[0] = s
    enc = torch.nn.Linear(192, 2 * d)                                # text encoder stand-in
    with torch.no_grad():
        enc.weight.copy_(0.05 * torch.randn(enc.weight.shape, generator=g))
        enc.bias.zero_()
    flow_log_scale = torch.zeros(1, d, 1, requires_grad=True)       # affine flow
    flow_shift = torch.zeros(1, d, 1, requires_grad=True)
    model = (enc.to(dev), flow_log_scale.to(dev).detach().requires_grad_(),
             flow_shift.to(dev).detach().requires_grad_())
    return (emb.to(dev), mel.to(dev), x_len.to(dev), y_len.to(dev)), model


def _forward_common(torch, inputs, model):
    emb, mel, x_len, y_len = inputs
    enc, log_scale, shift = model
    b, d, s = mel.shape
    t = emb.shape[1]
    stats = enc(emb).transpose(1, 2)                                 # [B, 2D, T]
    mean, log_std = stats[:, :d], stats[:, d:]
    x_mask = (torch.arange(t, device=mel.device)[None] < x_len[:, None]).to(mel.dtype)
    y_mask = (torch.arange(s, device=mel.device)[None] < y_len[:, None]).to(mel.dtype)
    z = (mel * torch.exp(log_scale) + shift) * y_mask[:, None]       # flow latents
    logdet = log_scale.sum() * y_len.to(mel.dtype)                   # [B]
    return mean, log_std, z, logdet, x_mask, y_mask


def _mle_loss(torch, z, z_m, z_logs, logdet, y_mask, d):
    nll = torch.sum(z_logs + 0.5 * torch.exp(-2 * z_logs) * (z - z_m) ** 2
                    * y_mask[:, None]) - torch.sum(logdet)
    return nll / (d * torch.sum(y_mask)) + 0.5 * math.log(2 * math.pi)


def step_fused(torch, libmas, inputs, model, precision):
    mean, log_std, z, logdet, x_mask, y_mask = _forward_common(torch, inputs, model)
    _, _, x_len, y_len = inputs
    with torch.no_grad():
        r = libmas.align_gaussian(z, mean, log_std, x_len, y_len, precision=precision)
    z_m = libmas.expand(mean, r.indices)                             # [B, D, S], 0 past y_len
    z_logs = libmas.expand(log_std, r.indices)
    loss = _mle_loss(torch, z, z_m, z_logs, logdet, y_mask, z.shape[1])
    loss.backward()
    return loss.detach()


def step_unfused(torch, libmas, inputs, model, precision):
    # TF32: PyTorch's own (torch.backends.cuda.matmul.allow_tf32, set by run_one)
    mean, log_std, z, logdet, x_mask, y_mask = _forward_common(torch, inputs, model)
    with torch.no_grad():
        # Glow-TTS's logp, [B, T, S]
        s_p_sq_r = torch.exp(-2 * log_std)
        logp1 = torch.sum(-0.5 * math.log(2 * math.pi) - log_std, [1]).unsqueeze(-1)
        logp2 = torch.matmul(s_p_sq_r.transpose(1, 2), -0.5 * (z ** 2))
        logp3 = torch.matmul((mean * s_p_sq_r).transpose(1, 2), z)
        logp4 = torch.sum(-0.5 * (mean ** 2) * s_p_sq_r, [1]).unsqueeze(-1)
        logp = logp1 + logp2 + logp3 + logp4
        attn_mask = x_mask[:, :, None] * y_mask[:, None, :]
        attn = libmas.maximum_path(logp, attn_mask)                  # [B, T, S]
    z_m = torch.matmul(attn.transpose(1, 2), mean.transpose(1, 2)).transpose(1, 2)
    z_logs = torch.matmul(attn.transpose(1, 2), log_std.transpose(1, 2)).transpose(1, 2)
    loss = _mle_loss(torch, z, z_m, z_logs, logdet, y_mask, z.shape[1])
    loss.backward()
    return loss.detach()


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def run_one(args):
    import torch

    import libmas

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    inputs, model = _setup(torch, args)
    fn = step_fused if args.only == "fused" else step_unfused
    cuda = args.device == "cuda"

    def once():
        for p in (model[0].weight, model[0].bias, model[1], model[2]):
            p.grad = None
        out = fn(torch, libmas, inputs, model, args.precision)
        if cuda:
            torch.cuda.synchronize()
        return out

    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    else:
        base = _rss_mb()
    loss = once()                                                    # first step: memory
    if cuda:
        peak = (torch.cuda.max_memory_allocated() - base) / 1e6
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3 - base
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    times.sort()
    grad_norm = float(sum(p.grad.double().norm() ** 2 for p in
                          (model[0].weight, model[1], model[2])) ** 0.5)
    print(json.dumps({"loss": float(loss), "ms": 1e3 * times[len(times) // 2],
                      "peak_mb": max(peak, 0.0), "grad_norm": grad_norm}))


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.only:
        run_one(args)
        return 0
    res = {}
    for variant in ("fused", "unfused"):
        cmd = [sys.executable, os.path.abspath(__file__), "--only", variant] + \
            (argv if argv is not None else sys.argv[1:])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        res[variant] = json.loads(out.strip().splitlines()[-1])
    f, u = res["fused"], res["unfused"]
    print(f"Glow-TTS step, B={args.batch} T={args.tokens} S={args.frames} D={args.channels}, "
          f"{args.device}, {args.precision}")
    print("| variant | loss | step (ms) | peak extra memory (MB) |")
    print("|---|---|---|---|")
    print(f"| fused (align_gaussian + expand) | {f['loss']:.6f} | {f['ms']:.2f} | "
          f"{f['peak_mb']:.1f} |")
    print(f"| unfused (PyTorch logp + maximum_path + matmuls) | {u['loss']:.6f} | "
          f"{u['ms']:.2f} | {u['peak_mb']:.1f} |")
    # TF32 on CUDA: the two variants' products round differently
    tol = 1e-3 if args.precision == "tf32" and args.device == "cuda" else 1e-4
    same = abs(f["loss"] - u["loss"]) <= tol * (1 + abs(u["loss"])) and \
        abs(f["grad_norm"] - u["grad_norm"]) <= 10 * tol * (1 + u["grad_norm"])
    print(f"same loss and gradients (within {tol:g}): " + ("yes" if same else "NO"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
