"""Soft alignment on PyTorch CUDA tensors against the CPU backend on the same
input: forward-sum (log_z and posterior), one-to-many and many-to-many
monotonic attention (log phi and, through autograd, d loss / d logits), with
per-item lengths, float32/float64 (and float16/bfloat16 inputs), logits of
+-1e4 and -inf value cells. Skips without a GPU or the CUDA backend."""

import numpy as np
import pytest

import libmas

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and libmas.has_cuda()),
    reason="needs a CUDA device and libmas built with its CUDA backend")

DTYPES = ["float32", "float64", "float16", "bfloat16"]


def tol(dtype_name):
    return (1e-10, 1e-9) if dtype_name == "float64" else (2e-4, 2e-4)


def lengths(rng, batch, a_max, b_max, ordered):
    a = rng.integers(1, a_max + 1, batch)
    b = rng.integers(1, b_max + 1, batch)
    a[0], b[0] = a_max, b_max
    if ordered:  # forward-sum: x_len <= y_len
        b = np.maximum(a, b)
    return torch.from_numpy(a.astype(np.int64)), torch.from_numpy(b.astype(np.int64))


def assert_close(got, want, rtol, atol):
    got, want = got.double().cpu(), want.double().cpu()
    assert not torch.isnan(got).any()
    both_inf = torch.isinf(got) & torch.isinf(want) & (got == want)
    diff = torch.where(both_inf, torch.zeros_like(got), (got - want).abs())
    bound = atol + rtol * torch.where(both_inf, torch.zeros_like(want), want.abs())
    assert (diff <= bound).all(), f"max excess {(diff - bound).max().item():.3g}"


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("layout", ["bts", "bst"])
def test_forward_sum_matches_cpu(rng, dtype_name, layout):
    batch, tokens, frames = 4, int(rng.integers(1, 60)), int(rng.integers(60, 300))
    x_len, y_len = lengths(rng, batch, tokens, frames, True)
    v = torch.from_numpy(rng.normal(size=(batch, tokens, frames)) * 2)
    v[torch.from_numpy(rng.random(v.shape) < 0.02)] = float("-inf")
    v[:, 0, 0] = 0.0
    for b in range(batch):
        v[b, x_len[b] - 1, y_len[b] - 1] = 0.0
    v = v.to(getattr(torch, dtype_name))
    if layout == "bst":
        v = v.transpose(1, 2).contiguous()
    rtol, atol = tol(dtype_name)
    try:
        want_z = libmas.forward_sum(v, x_len, y_len, layout=layout)
        want_post = libmas.posterior(v, x_len, y_len, layout=layout)
    except ValueError:
        pytest.skip("this draw has an item with no finite path")
    got_z = libmas.forward_sum(v.cuda(), x_len.cuda(), y_len.cuda(), layout=layout)
    got_post = libmas.posterior(v.cuda(), x_len.cuda(), y_len.cuda(), layout=layout)
    assert got_z.is_cuda and got_post.is_cuda
    assert_close(got_z, want_z, rtol, atol)
    assert_close(got_post, want_post, 10 * rtol, 10 * atol)


def test_forward_sum_autograd_is_posterior(rng):
    v = torch.from_numpy(rng.normal(size=(3, 20, 70))).cuda().requires_grad_()
    x_len = torch.tensor([20, 7, 1]).cuda()
    y_len = torch.tensor([70, 33, 5]).cuda()
    log_z = libmas.forward_sum(v, x_len, y_len)
    log_z.sum().backward()
    post = libmas.posterior(v.detach(), x_len, y_len)
    assert_close(v.grad, post, 1e-12, 1e-12)
    sums = post.sum(dim=1)
    for b in range(3):
        assert torch.allclose(sums[b, :y_len[b]], torch.ones_like(sums[b, :y_len[b]]),
                              atol=1e-9)


@pytest.mark.parametrize("kind", ["o2m", "m2m"])
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_attention_matches_cpu(rng, kind, dtype_name):
    fn = libmas.monotonic_attention if kind == "o2m" else libmas.monotonic_attention_m2m
    batch, n, m = 3, int(rng.integers(1, 80)), int(rng.integers(1, 80))
    n_len, m_len = lengths(rng, batch, n, m, False)
    x = torch.from_numpy(rng.normal(size=(batch, n, m)) * 3)
    extreme = torch.from_numpy(rng.random(x.shape) < 0.03)
    x[extreme] = 1e4 * torch.sign(x[extreme])
    x = x.to(getattr(torch, dtype_name))
    g = torch.from_numpy(rng.normal(size=(batch, n, m)))
    rtol, atol = tol(dtype_name)

    xc = x.clone().requires_grad_()
    want = fn(xc, n_len, m_len)
    want.backward(g.to(want.dtype))
    xg = x.cuda().requires_grad_()
    got = fn(xg, n_len.cuda(), m_len.cuda())
    got.backward(g.to(got.dtype).cuda())
    assert got.is_cuda and xg.grad.is_cuda
    assert_close(got, want, rtol * 10, atol * 10)
    assert_close(xg.grad.double(), xc.grad.double(), rtol * 50, atol * 50)


@pytest.mark.parametrize("kind", ["o2m", "m2m"])
def test_attention_gradcheck_cuda(rng, kind):
    fn = libmas.monotonic_attention if kind == "o2m" else libmas.monotonic_attention_m2m
    x = torch.from_numpy(rng.normal(size=(2, 5, 6))).cuda().requires_grad_()
    n_len = torch.tensor([5, 3]).cuda()
    m_len = torch.tensor([6, 4]).cuda()

    def f(t):
        out = fn(t, n_len, m_len)
        return torch.where(torch.isinf(out), torch.zeros_like(out), out)

    assert torch.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-6)


def test_large_attention_has_no_nan(rng):
    x = torch.from_numpy(rng.normal(size=(1, 2048, 3000)).astype(np.float32) * 4).cuda()
    x[0, ::7, ::5] = 1e4
    x[0, ::11, ::3] = -1e4
    for fn in (libmas.monotonic_attention, libmas.monotonic_attention_m2m):
        xg = x.clone().requires_grad_()
        out = fn(xg)
        out.backward(torch.ones_like(out))
        assert not torch.isnan(out).any()
        assert not torch.isnan(xg.grad).any()
