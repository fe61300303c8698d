"""Likelihoods on CUDA against the CPU backend (skipped without a GPU or a
CUDA build): same answers within the stated tolerance (default precision:
1e-4 relative on standardised data, exact for one-Gaussian states), tensor-
core precisions within their documented error, lengths, layouts, autograd."""

import numpy as np
import pytest

import libmas

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and libmas.has_cuda()),
    reason="needs a CUDA device and libmas built with CUDA")


def _model(rng, states, mix, dim):
    sizes = [int(rng.integers(1, mix + 1)) for _ in range(states)]
    m = sum(sizes)
    mu = torch.tensor(rng.standard_normal((m, dim)) * 0.5, dtype=torch.float32)
    var = torch.tensor(rng.uniform(0.5, 1.5, (m, dim)), dtype=torch.float32)
    lw = torch.tensor(rng.uniform(-3, 0, m), dtype=torch.float32)
    return mu, var, lw, sizes


def test_gmm_cuda_matches_cpu(rng):
    mu, var, lw, sizes = _model(rng, 50, 20, 36)
    x = torch.randn(3, 70, 36)
    cpu = libmas.GMM(mu, var, lw, sizes)
    gpu = libmas.GMM(mu.cuda(), var.cuda(), lw.cuda(), sizes)
    torch.testing.assert_close(gpu.coef.cpu(), cpu.coef, rtol=0, atol=0)
    want = cpu.loglik(x)
    got = gpu.loglik(x.cuda())
    libmas.check_errors()
    assert got.device.type == "cuda"
    assert float(((got.cpu() - want).abs() / want.abs()).max()) <= 1e-4
    b_want, i_want = cpu.loglik(x, best=True)
    b_got, i_got = gpu.loglik(x.cuda(), best=True)
    assert float(((b_got.cpu() - b_want).abs() / b_want.abs()).max()) <= 1e-4
    assert float((i_got.cpu() == i_want).float().mean()) > 0.99  # near-ties may differ
    for precision, tol in (("tf32", 0.05), ("bf16", 0.5)):
        got = gpu.loglik(x.cuda(), precision=precision)
        libmas.check_errors()
        assert float((got.cpu() - want).abs().max()) <= tol * (1 + float(want.abs().max()))


@pytest.mark.parametrize("g", [8, 16, 128, 256])
def test_gmm_uniform_mixtures(rng, g):
    # every state g Gaussians: every precision takes the kernel that log-adds
    # in registers (loglik_uniform.cuh); against the CPU's float32 within the
    # TF32 error, and within float32 rounding for the default precision
    states, dim = 11, 36
    m = states * g
    mu = torch.tensor(rng.standard_normal((m, dim)) * 0.5, dtype=torch.float32)
    var = torch.tensor(rng.uniform(0.5, 1.5, (m, dim)), dtype=torch.float32)
    lw = torch.tensor(rng.uniform(-3, 0, m), dtype=torch.float32)
    lw[: g] = -float("inf")  # state 0: every weight 0 -> -inf
    x = torch.randn(2, 301, dim)
    x[1, 7, 3] = float("nan")
    want = libmas.GMM(mu, var, lw, [g] * states).loglik(x)
    gpu = libmas.GMM(mu.cuda(), var.cuda(), lw.cuda(), [g] * states)
    for precision, tol in (("tf32", 0.05), ("bf16", 0.5)):
        got = gpu.loglik(x.cuda(), precision=precision).cpu()
        libmas.check_errors()
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        first = ~torch.isnan(want[:, :, 0])
        assert bool((got[:, :, 0][first] == -float("inf")).all())
        ok = ~torch.isnan(want) & torch.isfinite(want)
        assert float((got[ok] - want[ok]).abs().max()) <= tol * (1 + float(want[ok].abs().max()))
    # the default precision: the same Gaussian scores (fma chain) log-added in
    # another order than the CPU's and than the general kernel's (size unstated)
    got = gpu.loglik(x.cuda()).cpu()
    unstated = libmas.GMM(mu.cuda(), var.cuda(), lw.cuda(), [g] * states)
    unstated._uniform = 0
    general = unstated.loglik(x.cuda()).cpu()
    libmas.check_errors()
    for other in (want, general):
        assert torch.equal(torch.isnan(got), torch.isnan(other))
        assert torch.equal(got == -float("inf"), other == -float("inf"))
        ok = torch.isfinite(other)
        assert float((got[ok] - other[ok]).abs().max()) <= 1e-5 * (1 + float(other[ok].abs().max()))


@pytest.mark.parametrize("layout", ["bts", "bst"])
def test_gaussian_loglik_cuda_bits_equal_cpu(rng, layout):
    b, d, t, s = 3, 80, 17, 61
    z = torch.randn(b, d, s)
    m = torch.randn(b, d, t)
    logs = 0.3 * torch.randn(b, d, t)
    x_len = torch.tensor([17, 9, 1])
    y_len = torch.tensor([61, 30, 5])
    want = libmas.gaussian_loglik(z, m, logs, x_len, y_len, layout=layout)
    got = libmas.gaussian_loglik(z.cuda(), m.cuda(), logs.cuda(), x_len.cuda(), y_len.cuda(),
                                 layout=layout)
    libmas.check_errors()
    assert torch.equal(got.cpu(), want)  # one Gaussian per state: the same fma chain


def test_autograd_cuda_matches_cpu(rng):
    mu, var, lw, sizes = _model(rng, 6, 4, 5)
    x = torch.randn(2, 9, 5, dtype=torch.float64)
    args_cpu = [a.double().requires_grad_() for a in (x, mu, var, lw)]
    args_gpu = [a.detach().cuda().requires_grad_() for a in args_cpu]
    libmas.gmm_loglik(*args_cpu, sizes).sum().backward()
    libmas.gmm_loglik(*args_gpu, sizes).sum().backward()
    for a, g in zip(args_cpu, args_gpu):
        torch.testing.assert_close(g.grad.cpu(), a.grad, rtol=1e-9, atol=1e-9)
